"""ember.library: Python custom ops as real ops, compared with torch.library on the same code.

Each op is defined once as a function of the module `t` (ember or torch), registered in both, and
run through harness.check (values, dtypes, gradients through register_autograd).
"""

import itertools
from typing import Optional

import numpy as np
import pytest
from harness import check, check_error, torch

import ember
from ember.library import OpCheckError, opcheck

_ids = itertools.count()


def _ns() -> str:
    return f"emtest{next(_ids)}"  # a fresh namespace per op: both libraries keep ops forever


def define_scale(t, ns):
    """A custom op with a non-tensor arg, a fake kernel and a derivative, in module t."""
    @t.library.custom_op(f"{ns}::scale", mutates_args=())
    def scale(x: t.Tensor, k: float) -> t.Tensor:
        return x * k

    scale.register_fake(lambda x, k: t.empty_like(x))

    def setup(ctx, inputs, output):
        ctx.k = inputs[1]

    scale.register_autograd(lambda ctx, g: (g * ctx.k, None), setup_context=setup)
    return scale


def define_np_sin(t, ns):
    """A kernel in numpy (opaque to autograd), saving its input for the derivative."""
    @t.library.custom_op(f"{ns}::np_sin", mutates_args=())
    def np_sin(x: t.Tensor) -> t.Tensor:
        return t.from_numpy(np.sin(x.numpy()))

    @np_sin.register_fake
    def _(x):
        return t.empty_like(x)

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()

    np_sin.register_autograd(backward, setup_context=setup)
    return np_sin


@pytest.fixture(scope="module")
def ops():
    ns = _ns()
    for t in (ember, torch):
        define_scale(t, ns)
        define_np_sin(t, ns)
    return ns


def test_forward_and_grad_match_torch(ops):
    check(lambda t, x: getattr(t.ops, ops).scale(x, 2.5), shapes=[(3, 4)], grad=True)
    check(lambda t, x: getattr(t.ops, ops).np_sin(x) * 2, shapes=[(5,)], grad=True)


def test_double_backward_through_registered_derivative(ops):
    x = ember.tensor([0.5, 1.0], requires_grad=True)
    y = getattr(ember.ops, ops).np_sin(x).sum()
    (g,) = ember.autograd.grad(y, x, create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), -np.sin([0.5, 1.0]), rtol=1e-6)


@pytest.mark.parametrize("sig", [
    "x: Tensor, n: int = 2, y: Optional[Tensor] = None, s: float = 1.0, b: bool = False",
    "x: Tensor, l: Optional[list[int]] = None, name: str = 'a', *, f: float = 0.5",
    "xs: list[Tensor], d: Optional[dtype] = None, dev: Optional[device] = None",
    "x: Tensor, v: list[float], w: Optional[Tensor] = None",
])
def test_infer_schema_matches_torch(sig):
    schemas = []
    for t in (ember, torch):
        env = {"Tensor": t.Tensor, "Optional": Optional, "dtype": t.dtype, "device": t.device}
        exec(f"def f({sig}) -> Tensor: ...", env)  # noqa: S102 - our own test signature
        schemas.append(t.library.infer_schema(env["f"], mutates_args=()))
    assert schemas[0] == schemas[1]


def test_infer_schema_returns_and_mutation():
    def f(x: ember.Tensor, out: ember.Tensor) -> None: ...

    def g(x: ember.Tensor) -> tuple[ember.Tensor, ember.Tensor]: ...
    assert ember.library.infer_schema(f, mutates_args=("out",)) == \
        "(Tensor x, Tensor(a!) out) -> ()"
    assert ember.library.infer_schema(g, mutates_args=()) == "(Tensor x) -> (Tensor, Tensor)"


def test_infer_schema_errors_like_torch():
    for t in (ember, torch):
        def no_ann(x): ...

        def bad(x: dict) -> int: ...
        with pytest.raises(ValueError, match="must have a type annotation"):
            t.library.infer_schema(no_ann, mutates_args=())
        with pytest.raises(ValueError, match="unsupported type"):
            t.library.infer_schema(bad, mutates_args=())


def test_op_is_in_ember_ops_and_runs_through_the_dispatcher(ops):
    seen = []
    x = ember.ones(2)

    class Spy(ember._dispatch.DispatchMode):
        def __ember_dispatch__(self, op, args, out):
            seen.append(op.qualname)
            return ember._dispatch.call(op, args, out)

    with Spy():
        getattr(ember.ops, ops).scale(x, 2.0)
    assert seen == [f"{ops}::scale"]


def test_meta_uses_the_fake_kernel(ops):
    y = getattr(ember.ops, ops).np_sin(ember.empty(2, 3, device="meta"))
    assert y.device.type == "meta" and tuple(y.shape) == (2, 3)


def test_missing_fake_and_autograd_raise_like_torch():
    ns = _ns()
    for t in (ember, torch):
        @t.library.custom_op(f"{ns}::plain", mutates_args=())
        def plain(x: t.Tensor) -> t.Tensor:
            return x.clone()
    check_error(lambda t: getattr(t.ops, ns).plain(t.ones(2, device="meta")),
                match="no fake impl registered")
    check_error(lambda t: getattr(t.ops, ns).plain(t.ones(2, requires_grad=True)).sum()
                .backward(), match="no autograd formula was registered")


def test_mutating_op_bumps_version_and_returns_none():
    ns = _ns()

    @ember.library.custom_op(f"{ns}::add_into", mutates_args=("out",))
    def add_into(x: ember.Tensor, out: ember.Tensor) -> None:
        out.add_(x)
    o = ember.zeros(3)
    v = o._version
    assert add_into(ember.ones(3), o) is None
    assert o.tolist() == [1.0, 1.0, 1.0] and o._version > v
    assert opcheck(add_into, (ember.ones(3), ember.zeros(3)))["test_schema"] == "SUCCESS"


def test_output_aliasing_an_input_is_refused():
    ns = _ns()

    @ember.library.custom_op(f"{ns}::same", mutates_args=())
    def same(x: ember.Tensor) -> ember.Tensor:
        return x
    with pytest.raises(RuntimeError, match="may not alias any inputs"):
        same(ember.ones(2))


def test_register_kernel_per_device_and_keyword_only_args():
    ns = _ns()

    @ember.library.custom_op(f"{ns}::k", mutates_args=(), device_types="cpu")
    def k(x: ember.Tensor, *, alpha: float = 1.0) -> ember.Tensor:
        return x * alpha
    assert k(ember.ones(2), alpha=3.0).tolist() == [3.0, 3.0]
    k.register_kernel("cpu")(lambda x, *, alpha=1.0: x * alpha + 1)
    assert k(ember.ones(2), alpha=3.0).tolist() == [4.0, 4.0]


def test_opcheck_passes_good_ops_and_catches_bad_ones(ops):
    x = ember.randn(3, 2, dtype=ember.float64, requires_grad=True)
    assert set(opcheck(getattr(ember.ops, ops).np_sin, (x,)).values()) == {"SUCCESS"}
    ns = _ns()

    @ember.library.custom_op(f"{ns}::sneaky", mutates_args=())
    def sneaky(x: ember.Tensor) -> ember.Tensor:
        x.add_(1)  # an undeclared mutation
        return x.clone()
    sneaky.register_fake(lambda x: ember.empty(x.shape[0] + 1, device=x.device))  # wrong shape
    sneaky.register_autograd(lambda ctx, g: g * 3)  # wrong derivative
    res = opcheck(sneaky, (ember.randn(3, dtype=ember.float64, requires_grad=True),),
                  raise_exception=False)
    assert isinstance(res["test_schema"], OpCheckError)
    assert "mutated" in str(res["test_schema"])
    assert "shape" in str(res["test_faketensor"])
    assert "finite differences" in str(res["test_gradcheck"])
    with pytest.raises(OpCheckError):
        opcheck(sneaky, (ember.ones(3),), test_utils="test_schema")


def test_library_define_impl_and_composite():
    ns = _ns()
    lib = ember.library.Library(ns, "DEF")
    assert lib.define("twice(Tensor x) -> Tensor") == "twice"
    lib.impl("twice", lambda x: x * 2, "CPU")
    assert getattr(ember.ops, ns).twice(ember.ones(2)).tolist() == [2.0, 2.0]
    assert getattr(ember.ops, ns).twice.default(ember.ones(1)).tolist() == [2.0]
    lib.define("twice.int(Tensor x, int n) -> Tensor")
    lib.impl("twice.int", lambda x, n: x * 2 * n, "CPU")
    assert getattr(ember.ops, ns).twice.int(ember.ones(1), 3).tolist() == [6.0]
    lib.define("sq(Tensor x) -> Tensor")
    lib.impl("sq", lambda x: x * x, "CompositeImplicitAutograd")  # differentiated through
    x = ember.tensor([3.0], requires_grad=True)
    getattr(ember.ops, ns).sq(x).sum().backward()
    assert x.grad.tolist() == [6.0]
    with pytest.raises(RuntimeError, match="same name"):
        lib.define("twice(Tensor x) -> Tensor")
    with pytest.raises(RuntimeError, match="single TORCH_LIBRARY"):
        ember.library.Library(ns, "DEF")
    ember.library.define(f"{ns}::inc", "(Tensor x) -> Tensor")
    ember.library.impl(f"{ns}::inc", "cpu", lambda x: x + 1)
    ember.library.register_fake(f"{ns}::inc", lambda x: ember.empty_like(x))
    assert getattr(ember.ops, ns).inc(ember.zeros(1)).tolist() == [1.0]
    lib._destroy()
    with pytest.raises(AttributeError):
        getattr(ember.ops, ns).twice  # noqa: B018


def test_bad_names():
    with pytest.raises(ValueError, match="namespace"):
        ember.library.custom_op("nonamespace", mutates_args=())(lambda x: x)
    with pytest.raises(RuntimeError, match="own ops"):
        ember.library.impl("add", "cpu", lambda *a: None)


def test_abi_without_native_part_fails_clearly(monkeypatch):
    import sys

    from ember.library import _abi

    monkeypatch.setitem(sys.modules, "ember._C", None)  # as when ember._C is not built
    monkeypatch.delattr(ember, "_C", raising=False)
    with pytest.raises(RuntimeError, match="stable ABI needs ember._C"):
        _abi.abi_version()
