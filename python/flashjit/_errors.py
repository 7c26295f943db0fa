"""The exception the library's failures raise."""


class FlashjitError(RuntimeError):
    """A failure reported by libflashjit: ``status`` is its flashjit_status code (None when the library itself
    could not be loaded) and the message is the library's full description (what failed, its context lines,
    compiler logs)."""

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.status = status
        self.status_name = status_name
