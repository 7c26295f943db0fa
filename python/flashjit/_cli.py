"""The `flashjit` console script of the wheel: runs the CLI binary shipped in the package (flashjit/bin/flashjit),
else the repository build's, with the NVRTC the Python package uses (configure_nvrtc)."""
import os
import sys
from pathlib import Path

from ._library import configure_nvrtc


def executable() -> Path:
    """The CLI binary: inside the package, else the repository build's (build/flashjit next to python/)."""
    package = Path(__file__).resolve().parent
    for path in (package / "bin" / "flashjit", package.parent.parent / "build" / "flashjit"):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(f"no flashjit CLI binary in {package / 'bin'} or the repository build")


def main() -> int:
    try:
        exe = executable()
    except FileNotFoundError as e:
        print(f"flashjit: {e}", file=sys.stderr)
        return 1
    configure_nvrtc()
    os.execv(str(exe), [str(exe)] + sys.argv[1:])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
