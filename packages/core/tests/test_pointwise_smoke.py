"""First pointwise/creation/view checks against torch (the op database extends these)."""
import pytest
from harness import ALL, FLOATS, check, check_error


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "atan2"])
def test_binary(name):
    check(lambda t, x, y: getattr(t, name)(x, y), shapes=[(3, 4), (4,)])


def test_promotion_scalars():
    check(lambda t, x: x + 2.5, dtypes=("int32", "int64", "float16", "float32"))
    check(lambda t, x: x * 2, dtypes=ALL[1:])
    check(lambda t, x: x / 2, dtypes=("int32", "int64", "float32", "uint8"))
    check(lambda t, x: t.tensor(1.5, dtype=t.float64) * x, dtypes=("int64", "float32"))


def test_views_alias():
    check(lambda t, x: x.t().reshape(-1), shapes=[(3, 4)])
    check(lambda t, x: x.permute(2, 0, 1).contiguous(), shapes=[(2, 3, 4)], check_stride=True)
    check(lambda t, x: x.unsqueeze(1).expand(3, 5, 4), shapes=[(3, 4)], check_stride=True)


def test_broadcast_error():
    check_error(lambda t: t.ones(2, 3) + t.ones(4))


def test_inplace_cast_error():
    check_error(lambda t: t.ones(2, dtype=t.int64).add_(1.5))
