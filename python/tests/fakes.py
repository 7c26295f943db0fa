"""Tensor stand-ins with the attributes flashjit's checks read, for tests without torch or a GPU."""
import itertools

_addresses = itertools.count(0x7f0000000000, 1 << 24)


class FakeDevice:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    __repr__ = __str__

    # Equal by name, as torch.device is (memo keys hold devices).
    def __eq__(self, other):
        return isinstance(other, FakeDevice) and other.name == self.name

    def __hash__(self):
        return hash(self.name)


class FakeTensor:
    def __init__(self, shape, dtype="torch.bfloat16", device="cuda:0", strides=None, ptr=None, is_cuda=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = FakeDevice(device)
        self.is_cuda = device.startswith("cuda") if is_cuda is None else is_cuda
        self._strides = tuple(strides) if strides is not None else contiguous(self.shape)
        self._ptr = next(_addresses) if ptr is None else ptr

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr


def contiguous(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def qkv(b=2, sq=64, sk=96, hq=8, hkv=2, d=64, dtype="torch.bfloat16"):
    return (FakeTensor((b, sq, hq, d), dtype), FakeTensor((b, sk, hkv, d), dtype), FakeTensor((b, sk, hkv, d), dtype))
