"""Division by zero against torch: float results are inf/nan whatever the zero's type (the Python
int 0 included), integer division raises PyTorch's RuntimeError "ZeroDivisionError"; the same on
the small-tensor numpy path and on the large-tensor one."""
import numpy as np
import pytest
from harness import torch

import ember

OPS = {
    "mod": lambda t, x, z: x % z,
    "floordiv": lambda t, x, z: x // z,
    "fmod": lambda t, x, z: t.fmod(x, z),
    "remainder": lambda t, x, z: t.remainder(x, z),
    "div_floor": lambda t, x, z: t.div(x, z, rounding_mode="floor"),
    "div_trunc": lambda t, x, z: t.div(x, z, rounding_mode="trunc"),
    "div": lambda t, x, z: t.div(x, z),
    "rmod": lambda t, x, z: 5 % (x * z),
    "rfloordiv": lambda t, x, z: 5 // (x * z),
    "remainder_": lambda t, x, z: x.clone().remainder_(z),
    "floor_divide_": lambda t, x, z: x.clone().floor_divide_(z),
}
ZEROS = {"int": lambda t: 0, "float": lambda t: 0.0, "bool": lambda t: False,
         "int_tensor": lambda t: t.tensor(0), "float_tensor": lambda t: t.tensor(0.0)}


def _run(t, op, dtype, zero, n):
    x = t.tensor(np.resize(np.array([3, 0, 5, 1]), n)).to(getattr(t, dtype))
    try:
        r = OPS[op](t, x, ZEROS[zero](t))
    except Exception as e:  # noqa: BLE001 - compared with torch's
        return type(e).__name__, str(e)
    return str(r.dtype).split(".")[-1], r.float().numpy()


# 70_000 elements take the large-tensor path (compiled kernels where a C compiler is present)
CASES = [(d, 4) for d in ("float32", "float64", "bfloat16", "int64", "uint8")] + \
    [("float32", 70_000), ("int64", 70_000)]


@pytest.mark.parametrize("dtype,n", CASES)
@pytest.mark.parametrize("op", sorted(OPS))
def test_division_by_zero_as_torch(op, dtype, n):
    for zero in ZEROS:
        e, t = _run(ember, op, dtype, zero, n), _run(torch, op, dtype, zero, n)
        assert e[0] == t[0], (zero, e, t)
        if isinstance(t[1], str):
            assert t[1] != "ZeroDivisionError" or e[1] == t[1], (zero, e, t)
        else:
            np.testing.assert_array_equal(e[1], t[1], err_msg=zero)
