"""The per-call memo behind attention(), attention_varlen(), decode() and merge(): their argument checks and
the C structure they build depend only on what a call's key holds (each tensor's device, dtype, shape and
strides, and the scalar options), so a call whose key was seen before reuses the checked structure and fills
in its addresses and stream, the only per-call parts. The addresses' alignment (and, for merge, that out
aliases no input) is checked on every call.

A key holds no tensor, only metadata. An option enters a key only as a value of exactly the type its check
takes (a bool or a float hashes like the int the checks would refuse it as), and a call with any other
value, or with an attribute that cannot be hashed, is not memoized: it runs every check."""

_MAX_ENTRIES = 4096


def tensor_key(t):
    """What the checks read of a tensor besides its data pointer."""
    return (t.is_cuda, t.device, t.dtype, t.shape, t.stride())


def ints(*values):
    """Whether every value may enter a key as an integer option: None or exactly an int (True == 1 and 1.0 == 1
    hash alike, but the checks refuse bools and floats)."""
    return all(v is None or type(v) is int for v in values)


def number(value):
    """Whether a float option may enter a key: None, or exactly an int or a float."""
    return value is None or type(value) in (int, float)


def aligned(by16, by4):
    """Whether addresses keep the alignment the checks require: 16 bytes for q, k, v and out (by16), 4 for
    the int32 tensors (by4); 0 stands for a missing tensor."""
    wide = narrow = 0
    for a in by16:
        wide |= a
    for a in by4:
        narrow |= a
    return wide % 16 == 0 and narrow % 4 == 0


class Memo:
    """A bounded dict (emptied when full, so varying shapes cannot grow it without limit); safe to share
    between threads, whose worst case is computing an entry twice."""

    def __init__(self):
        self._entries = {}

    def get(self, key):
        if key is None:
            return None
        try:
            return self._entries.get(key)
        except TypeError:  # an unhashable attribute (a duck-typed tensor): no memo
            return None

    def put(self, key, value):
        if key is None:
            return
        try:
            if len(self._entries) >= _MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = value
        except TypeError:
            pass

    def checked(self, key, check, out, allocate, addresses):
        """(entry, out, addresses) of a call: the entry stored under key when the call's addresses (addresses(out):
        q, k, v and out by 16 bytes, then the int32 tensors by 4) keep their alignment, with out = allocate()
        when None; else check(out) -> (entry, out), which runs every check (naming what is wrong), and its entry
        is stored."""
        entry = self.get(key)
        if entry is not None:
            found = addresses(out)
            if not aligned(found[:4], found[4:]):
                entry = None
            elif out is None:
                out = allocate()
                found = addresses(out)
        if entry is None:
            entry, out = check(out)
            self.put(key, entry)
            found = addresses(out)
        return entry, out, found

    def clear(self):
        self._entries.clear()

    def __len__(self):
        return len(self._entries)
