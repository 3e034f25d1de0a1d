"""Integer and bool amax/amin/max/min/argmax/argmin on cuda run GPU kernels (none on host
copies) and match PyTorch 2.13 on the CPU: dims, keepdim, ties (first index), extremes of each
dtype, long rows, bool's argmax error. On a GPU in-process, else on the fake device."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember, torch
from ember._device import get_backend
be = get_backend("cuda")
rng = np.random.default_rng(0)
OPS = ("amax", "amin", "max", "min", "argmax", "argmin")

def check(a, name, *args, **kw):
    want = getattr(torch, name)(torch.from_numpy(a), *args, **kw)
    got = getattr(ember, name)(ember.tensor(a).cuda(), *args, **kw)
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for u, v in zip(want, got):
        v = v.cpu()
        assert str(v.dtype) == str(u.dtype).replace("torch", "ember"), (name, u, v)
        assert tuple(v.shape) == tuple(u.shape) and np.array_equal(v.numpy(), u.numpy()), \
            (name, args, kw, a, u, v)

def sample(dt):
    info = np.iinfo(dt)
    a = rng.integers(info.min, int(info.max) + 1, (4, 5, 3), dtype=dt)
    a[1, :, 0] = info.max          # ties: the first index wins
    a[2, 3, :] = info.min
    a[3, 0, 0] = a[3, 4, 0] = info.max
    return a

a = sample("int64")
for name in OPS:
    check(a, name)
    for d in (0, -1):
        if name in ("max", "min"):
            check(a, name, d, keepdim=d == 0)
        else:
            check(a, name, dim=d, keepdim=d == 0)
check(a, "amax", dim=(0, 2))
check(a, "amin", dim=(1, 2), keepdim=True)
check(a[:, ::2, 1:], "argmax", dim=1)   # a strided view
check(rng.integers(0, 100, (2, 2500)), "argmin", dim=1)  # rows longer than a block
for dt in ("int32", "int16", "int8", "uint8"):
    a = sample(dt)
    check(a, "max")
    check(a, "amin", dim=1)
    check(a, "argmax", dim=2)
b = rng.random((4, 6)) > 0.5
check(b, "max")
check(b, "amin", dim=1)
assert not any(k.split(".")[0] in OPS for k in be.fallback_ops), be.fallback_ops
for name in ("argmax", "argmin"):  # PyTorch's error for bool, from the host kernel
    try:
        getattr(ember, name)(ember.tensor(b).cuda())
    except RuntimeError as e:
        assert "bool" in str(e), e
    else:
        raise AssertionError(name)
"""


def test_integer_extremes_on_the_gpu():
    run_script(SCRIPT, "cuda_int_extremes")
