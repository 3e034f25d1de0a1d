"""The op database: one short sample-input record per op of the table (JAX op_record style).

    R("add", lambda s: (s.randn(3, 4), s.randn(4)))

`s` makes numpy inputs (floats as float64; the tests cast them to the dtype under test); the
record's args go to the OpDef in schema order, and to torch's op of the same name
(`torch.ops.aten.<name>[.<overload>]`) unless `ref` names another torch callable. `ref=False`
marks an ember-internal op with no torch counterpart: it is checked for meta, out= and
gradients, not values. test_op_table.py drives the generic tests from RECORDS.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


class DType:
    """A dtype argument, turned into ember.<name> or torch.<name> by the test."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


class Samples:
    """Deterministic sample inputs (numpy), the same for ember and torch."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)

    def randn(self, *shape):
        return self.rng.standard_normal(shape)

    def rand(self, *shape, lo=0.0, hi=1.0):
        return self.rng.uniform(lo, hi, shape)

    def pos(self, *shape):  # away from 0 (log, sqrt, division)
        return self.rng.uniform(0.5, 2.0, shape)

    def unit(self, *shape):  # inside (-1, 1) (asin, atanh, erfinv)
        return self.rng.uniform(-0.9, 0.9, shape)

    def prob(self, *shape):  # inside (0, 1) away from the ends
        return self.rng.uniform(0.1, 0.9, shape)

    def int(self, *shape, lo=0, hi=5, dtype="int64"):
        return self.rng.integers(lo, hi, shape).astype(dtype)

    def bool(self, *shape):
        return self.rng.random(shape) > 0.5

    def perm(self, n):
        return self.rng.permutation(n).astype("int64")

    def spd(self, n, *batch):  # symmetric positive definite
        a = self.rng.standard_normal(batch + (n, n))
        return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)

    def sorted(self, *shape):
        return np.sort(self.rng.standard_normal(shape), axis=-1)

    def distinct(self, *shape):  # distinct integers: no ties, even cast to an integer dtype
        n = int(np.prod(shape))
        return (self.rng.permutation(n) - n // 2).astype("float64").reshape(shape)

    def dtype(self, name):
        return DType(name)


@dataclass
class R:
    name: str                         # OpDef qualname: "add", "max.dim"
    sample: Callable                  # Samples -> tuple of args in schema order
    kw: dict = field(default_factory=dict)
    ref: Callable | bool | None = None  # torch callable; None: torch.ops.aten.<qualname>
    grad: bool = True                 # check gradients where the op is differentiable
    values: bool = True               # False: random/uninitialized outputs (shape, dtype only)
    rtol: float | None = None
    atol: float | None = None
    outs: tuple | None = None         # compare only these outputs with torch (eigenvectors'
    #                                   signs, internal workspaces differ)
    gout: int | None = None           # only the first gout outputs are differentiable
    fd: bool = True                   # check gradients by finite differences (else torch only)
    sym: bool = False                 # the op reads one triangle: differentiate f((A + A^T) / 2)
    wrt: tuple | None = None          # differentiate only these args (default: the op's)
    dtype: str = "float32"            # floating dtype of the forward, meta and out= tests
    tgrad: bool = True                # compare gradients with torch's
    id: str = ""

    def __str__(self):
        return self.id or self.name


def unary(*names, sample=None, **kw):
    return [R(n, sample or (lambda s: (s.randn(3, 4),)), **kw) for n in names]


def binary(*names, sample=None, **kw):
    return [R(n, sample or (lambda s: (s.randn(3, 4), s.randn(4))), **kw) for n in names]


X = lambda s: (s.randn(3, 4),)  # noqa: E731
F64 = DType("float64")
F32 = DType("float32")
NCHW = lambda s: (s.randn(2, 3, 5, 5),)  # noqa: E731


def _softmax(x, dim):
    e = np.exp(x - x.max(dim, keepdims=True))
    return e / e.sum(dim, keepdims=True)


def _attn_bwd_args(s, mask, scale):
    """_fused_attention_backward's args (grad, q, k, v, mask, out, lse, causal, scale) with out
    and lse the forward's (the kernels read them; the decomposition recomputes them)."""
    q, k, v, g = s.randn(1, 2, 3, 4), s.randn(1, 2, 5, 4), s.randn(1, 2, 5, 4), s.randn(1, 2, 3, 4)
    sc = np.where(mask, q @ k.swapaxes(-1, -2) * scale, -np.inf)
    m = sc.max(-1, keepdims=True)
    lse = (m + np.log(np.exp(sc - m).sum(-1, keepdims=True)))[..., 0]
    return g, q, k, v, mask, _softmax(sc, -1) @ v, lse, False, scale


def _torch():
    import torch
    return torch


def _F(name):
    def ref(*args, **kw):
        import torch.nn.functional as F
        return getattr(F, name)(*args, **kw)
    return ref


RECORDS = [
    # ---- creation / memory ----------------------------------------------------------------------
    R("empty", lambda s: ([2, 3],), values=False),
    R("float_power_", lambda s: (s.pos(3, 4), s.randn(4)), dtype="float64"),
    R("zeros", lambda s: ([2, 3],)), R("ones", lambda s: ([2, 3],)),
    R("full", lambda s: ([2, 3], 1.5)),
    R("empty_like", X, values=False), R("zeros_like", X), R("ones_like", X),
    R("full_like", lambda s: (s.randn(3, 4), 2.0)),
    R("arange", lambda s: (1, 7, 2)), R("linspace", lambda s: (0.0, 1.0, 5)),
    R("logspace", lambda s: (0.0, 2.0, 4)), R("eye", lambda s: (3, 4)),
    R("clone", X), R("copy_", lambda s: (s.randn(3, 4), s.randn(4))),
    R("_to_copy", X, kw={"dtype": F64}), R("fill_", lambda s: (s.randn(3, 4), 2.5)),
    R("zero_", X), R("detach", X), R("alias", X), R("contiguous", X),
    # ---- pointwise ------------------------------------------------------------------------------
    *binary("add", "sub", "mul", "rsub", "div", "true_divide", "atan2", "maximum", "minimum",
            "fmax", "fmin", "hypot", "logaddexp", "logaddexp2", "nextafter", "eq", "ne", "lt",
            "le", "gt", "ge", "copysign"),
    R("add", lambda s: (s.randn(3, 4), s.randn(4)), kw={"alpha": 2}, id="add_alpha"),
    R("div", lambda s: (s.randn(3, 4), s.pos(4)), kw={"rounding_mode": "floor"},
      id="div_floor"),
    *binary("floor_divide", "remainder", "fmod", sample=lambda s: (s.randn(3, 4), s.pos(4))),
    *binary("pow", "float_power", sample=lambda s: (s.pos(3, 4), s.randn(4))),
    *binary("xlogy", sample=lambda s: (s.randn(3, 4), s.pos(4))),
    *unary("neg", "abs", "sign", "sgn", "square", "exp", "exp2", "expm1", "sin", "cos", "tan",
           "sinh", "cosh", "tanh", "atan", "asinh", "sigmoid", "erf", "erfc", "relu", "gelu",
           "silu", "floor", "ceil", "trunc", "round", "frac", "deg2rad", "rad2deg", "positive",
           "isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit", "isreal", "real",
           "conj_physical", "conj", "angle", "relu6", "hardtanh", "elu", "selu", "celu",
           "leaky_relu", "hardsigmoid", "hardswish", "hardshrink", "softshrink",
           "softplus", "mish", "nan_to_num", "logical_not"),
    *[R(n, X, ref=_F(n)) for n in ("tanhshrink", "logsigmoid", "softsign")],
    R("_nan_to_num_values", lambda s: (np.array([[np.nan, np.inf], [-np.inf, 1.5]]), 0.5, 2.0,
                                       -2.0), ref=False),
    R("_angle_real", lambda s: (np.array([[-1.5, -0.5], [0.5, 2.0]]),), ref=False),
    R("imag", lambda s: (s.randn(3, 4) + 1j * s.randn(3, 4),)),
    R("gelu", X, kw={"approximate": "tanh"}, id="gelu_tanh"),
    R("gelu_backward", lambda s: (s.randn(3, 4), s.randn(3, 4))),
    R("round", X, kw={"decimals": 2}, id="round_decimals"),
    R("threshold", lambda s: (s.randn(3, 4), 0.1, 2.0)),
    R("threshold_backward", lambda s: (s.randn(3, 4), s.randn(3, 4), 0.1)),
    # a softmax / log_softmax output (the backward ops read the forward's result)
    R("_softmax_backward_data", lambda s: (s.randn(3, 5), _softmax(s.randn(3, 5), 1), 1, F32)),
    R("_softmax_backward_data", lambda s: (s.randn(4, 3), _softmax(s.randn(4, 3), 0), 0, F32),
      id="_softmax_backward_data_dim0"),
    R("_log_softmax_backward_data", lambda s: (
        s.randn(3, 5), np.log(_softmax(s.randn(3, 5), 1)), -1, F32)),
    *unary("reciprocal", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "lgamma", "digamma",
           sample=lambda s: (s.pos(3, 4),)),
    *unary("asin", "acos", "atanh", "erfinv", sample=lambda s: (s.unit(3, 4),)),
    R("acosh", lambda s: (s.pos(3, 4) + 1,)),
    R("logit", lambda s: (s.prob(3, 4),)),
    R("logit", lambda s: (s.prob(3, 4), 0.2), id="logit_eps"),
    R("polygamma", lambda s: (s.pos(3, 4), 1),
      ref=lambda x, n: __import__("torch").polygamma(n, x)),
    R("where", lambda s: (s.bool(3, 4), s.randn(3, 4), s.randn(4))),
    R("clamp", lambda s: (s.randn(3, 4), s.randn(4) - 1, s.randn(4) + 1)),
    R("clamp_min", lambda s: (s.randn(3, 4), s.randn(4))),
    R("clamp_max", lambda s: (s.randn(3, 4), s.randn(4))),
    R("lerp", lambda s: (s.randn(3, 4), s.randn(4), s.rand(3, 4))),
    *[R(n, lambda s: (s.randn(3, 4), s.randn(4), s.pos(3, 1)), kw={"value": 0.5})
      for n in ("addcmul", "addcdiv")],
    *binary("logical_and", "logical_or", "logical_xor", grad=False),
    *binary("bitwise_and", "bitwise_or", "bitwise_xor",
            sample=lambda s: (s.int(3, 4, lo=-8, hi=8), s.int(4, lo=-8, hi=8))),
    *binary("bitwise_left_shift", "bitwise_right_shift",
            sample=lambda s: (s.int(3, 4, lo=-8, hi=8), s.int(4, hi=4))),
    R("bitwise_not", lambda s: (s.int(3, 4, lo=-8, hi=8),)),
    R("masked_fill", lambda s: (s.randn(3, 4), s.bool(4), np.array(1.5))),
    # ---- reductions -----------------------------------------------------------------------------
    *[R(n, X) for n in ("sum", "nansum", "mean", "nanmean", "prod", "max", "min", "amax", "amin",
                        "argmax", "argmin", "aminmax", "var", "std", "var_mean", "std_mean",
                        "norm", "all", "any", "count_nonzero", "median", "nanmedian", "msort",
                        "corrcoef", "trace", "cov")],
    R("sum", X, kw={"dim": [1], "keepdim": True, "dtype": F64}, id="sum_dim_dtype"),
    R("mean", X, kw={"dim": [0]}, id="mean_dim"), R("prod", X, kw={"dim": 1}, id="prod_dim"),
    R("max.dim", lambda s: (s.distinct(3, 4), 1)), R("min.dim", lambda s: (s.distinct(3, 4), 0)),
    R("var", X, kw={"dim": [1], "correction": 0}, id="var_dim"),
    R("norm", lambda s: (s.randn(3, 4), 3, [1])),
    R("dist", lambda s: (s.randn(3, 4), s.randn(4))),
    R("logsumexp", lambda s: (s.randn(3, 4), [1])),
    R("softmax", lambda s: (s.randn(3, 4), 1), ref=lambda x, d: __import__("torch").softmax(x, d)),
    R("log_softmax", lambda s: (s.randn(3, 4), 1),
      ref=lambda x, d: __import__("torch").log_softmax(x, d)),
    *[R(n, lambda s: (s.randn(3, 4), 1)) for n in ("cumsum", "cumprod", "logcumsumexp")],
    *[R(n, lambda s: (s.distinct(3, 4), 1)) for n in ("cummax", "cummin")],
    R("diff", lambda s: (s.randn(3, 4), 1, -1, s.randn(3, 1))),
    R("trapezoid", lambda s: (s.randn(3, 4),), ref=lambda y: __import__("torch").trapezoid(y)),
    R("cumulative_trapezoid", lambda s: (s.randn(3, 4),),
      ref=lambda y: __import__("torch").cumulative_trapezoid(y)),
    R("sort", lambda s: (s.distinct(3, 4), 1, True)),
    R("argsort", lambda s: (s.distinct(3, 4),)),
    R("topk", lambda s: (s.distinct(3, 4), 2)),
    R("kthvalue", lambda s: (s.distinct(3, 4), 2)),
    R("median", lambda s: (s.distinct(3, 5),), id="median_distinct"),
    R("median.dim", lambda s: (s.distinct(3, 5), 1)),
    R("nanmedian.dim", lambda s: (s.distinct(3, 5), 1)),
    R("mode", lambda s: (s.int(3, 6).astype("float64"), 1), grad=False),  # ties
    R("mode", lambda s: (s.distinct(3, 6), 1), id="mode_distinct"),
    # q gets no gradient (PyTorch's derivative treats it as a constant)
    *[R(n, lambda s: (s.randn(3, 5), np.array([0.25, 0.5]), 1), wrt=(0,))
      for n in ("quantile", "nanquantile")],
    R("_unique2", lambda s: (s.int(8), True, True, True)),
    R("unique_dim", lambda s: (s.int(4, 2, hi=2), 0, True, True, True)),
    R("unique_consecutive", lambda s: (s.int(8, hi=3), True, True)),
    R("bincount", lambda s: (s.int(8), s.rand(8))),
    R("histc", lambda s: (s.randn(10), 4, -2.0, 2.0)),
    # ---- movement -------------------------------------------------------------------------------
    R("view", lambda s: (s.randn(3, 4), [4, 3])),
    R("view.dtype", lambda s: (s.randn(3, 4), DType("int32")), grad=False),
    R("view_as", lambda s: (s.randn(3, 4), s.randn(2, 6))),
    R("reshape", lambda s: (s.randn(3, 4), [2, -1])),
    R("reshape_as", lambda s: (s.randn(3, 4), s.randn(6, 2))),
    R("flatten", lambda s: (s.randn(2, 3, 4), 1)), R("ravel", X),
    R("unflatten", lambda s: (s.randn(3, 4), 1, [2, 2])),
    R("squeeze.dims", lambda s: (s.randn(3, 1, 4, 1), [1, 3])),
    R("unsqueeze", lambda s: (s.randn(3, 4), 1)),
    R("permute", lambda s: (s.randn(2, 3, 4), [2, 0, 1])),
    R("transpose.int", lambda s: (s.randn(2, 3, 4), 0, 2)), R("t", X), R("adjoint", X),
    R("expand", lambda s: (s.randn(3, 1), [2, 3, 4])),
    R("expand_as", lambda s: (s.randn(3, 1), s.randn(3, 4))),
    R("broadcast_to", lambda s: (s.randn(3, 1), [3, 4])),
    R("broadcast_tensors", lambda s: ([s.randn(3, 1), s.randn(4)],)),
    R("select.int", lambda s: (s.randn(3, 4), 1, 2)),
    R("slice.Tensor", lambda s: (s.randn(5, 4), 0, 1, 5, 2)),
    R("narrow", lambda s: (s.randn(3, 5), 1, 1, 3)),
    R("split.Tensor", lambda s: (s.randn(5, 4), 2)),
    R("split_with_sizes", lambda s: (s.randn(5, 4), [1, 3], 1)),
    R("chunk", lambda s: (s.randn(5, 4), 2)),
    R("tensor_split", lambda s: (s.randn(5, 4), [1, 3]),
      ref=lambda x, i: __import__("torch").tensor_split(x, i)),
    *[R(n, lambda s: (s.randn(4, 4, 2), [1]), ref=lambda x, i, n=n: getattr(
        __import__("torch"), n)(x, i)) for n in ("hsplit", "vsplit", "dsplit")],
    R("unbind.int", lambda s: (s.randn(3, 4), 1)),
    R("diagonal", lambda s: (s.randn(3, 4), 1)),
    R("movedim.intlist", lambda s: (s.randn(2, 3, 4), [0], [2])),
    R("as_strided", lambda s: (s.randn(3, 4), [2, 2], [1, 2], 1)),
    R("unfold", lambda s: (s.randn(3, 7), 1, 3, 2)),
    R("cat", lambda s: ([s.randn(2, 4), s.randn(3, 4)],)),
    *[R(n, lambda s: ([s.randn(3, 4), s.randn(3, 4)],))
      for n in ("stack", "hstack", "vstack", "dstack", "column_stack")],
    R("flip", lambda s: (s.randn(3, 4), [0, 1])), R("fliplr", X), R("flipud", X),
    R("roll", lambda s: (s.randn(3, 4), [1], [1])),
    R("rot90", lambda s: (s.randn(3, 4), 1, [0, 1])),
    R("repeat", lambda s: (s.randn(3, 4), [2, 1, 2])),
    R("tile", lambda s: (s.randn(3, 4), [2, 1])),
    R("repeat_interleave.self_Tensor", lambda s: (s.randn(3, 4), np.array([1, 0, 2]), 0)),
    R("diag", lambda s: (s.randn(3, 4), 1)), R("diagflat", lambda s: (s.randn(3),)),
    R("diag_embed", lambda s: (s.randn(2, 3),)),
    R("tril", lambda s: (s.randn(3, 4), 1)), R("triu", lambda s: (s.randn(3, 4), -1)),
    R("select_scatter", lambda s: (s.randn(3, 4), s.randn(4), 0, 1)),
    R("slice_scatter", lambda s: (s.randn(5, 4), s.randn(2, 4), 0, 1, 5, 2)),
    R("slice_backward", lambda s: (s.randn(2, 4), [5, 4], 0, 1, 5, 2)),
    R("slice_backward", lambda s: (s.randn(3, 2), [3, 7], -1, -3, -1, 1), id="slice_backward_neg"),
    R("diagonal_scatter", lambda s: (s.randn(3, 4), s.randn(3),)),
    # torch 2.13's grad for self is wrong (its own gradcheck fails): finite differences only
    R("as_strided_scatter", lambda s: (s.randn(3, 4), s.randn(2, 2), [2, 2], [1, 2], 1),
      tgrad=False),
    # ---- indexing / scatter ---------------------------------------------------------------------
    R("index.Tensor", lambda s: (s.randn(3, 4), [np.array([2, 0, 2]), None])),
    R("index_put", lambda s: (s.randn(3, 4), [np.array([2, 0])], s.randn(2, 4), True)),
    R("index_put_", lambda s: (s.randn(3, 4), [np.array([2, 0])], s.randn(2, 4))),
    R("masked_select", lambda s: (s.randn(3, 4), s.bool(4))),
    R("masked_scatter", lambda s: (s.randn(3, 4), s.bool(4), s.randn(12))),
    R("take", lambda s: (s.randn(3, 4), np.array([[0, 5], [11, 2]]))),
    R("put", lambda s: (s.randn(3, 4), np.array([0, 5, 11]), s.randn(3))),
    R("take_along_dim", lambda s: (s.randn(3, 4), s.int(3, 2, hi=4), 1)),
    R("nonzero", lambda s: (s.bool(3, 4),)), R("argwhere", lambda s: (s.bool(3, 4),)),
    R("searchsorted.Tensor", lambda s: (s.sorted(3, 5), s.randn(3, 2))),
    R("bucketize.Tensor", lambda s: (s.randn(3, 4), s.sorted(5))),
    R("gather", lambda s: (s.randn(3, 4), 1, s.int(3, 2, hi=4))),
    R("scatter", lambda s: (s.randn(3, 4), 1, np.array([[0, 3], [1, 2], [2, 0]]), s.randn(3, 2))),
    R("scatter_add", lambda s: (s.randn(3, 4), 1, s.int(3, 2, hi=4), s.randn(3, 2))),
    R("scatter_reduce.two", lambda s: (s.randn(3, 4), 1, s.int(3, 2, hi=4), s.randn(3, 2),
                                       "amax")),
    R("index_select", lambda s: (s.randn(3, 4), 1, np.array([3, 0, 3]))),
    R("index_add", lambda s: (s.randn(3, 4), 1, np.array([3, 0, 3]), s.randn(3, 3))),
    R("index_copy", lambda s: (s.randn(3, 4), 1, np.array([3, 0]), s.randn(3, 2))),
    R("index_fill.int_Scalar", lambda s: (s.randn(3, 4), 1, np.array([3, 0]), 1.5)),
    # ---- linalg ---------------------------------------------------------------------------------
    R("matmul", lambda s: (s.randn(2, 3, 4), s.randn(4, 2))),
    R("mm", lambda s: (s.randn(3, 4), s.randn(4, 2))),
    R("bmm", lambda s: (s.randn(2, 3, 4), s.randn(2, 4, 2))),
    R("mv", lambda s: (s.randn(3, 4), s.randn(4))),
    *[R(n, lambda s: (s.randn(4), s.randn(4))) for n in ("dot", "vdot", "outer", "inner")],
    R("addmm", lambda s: (s.randn(2), s.randn(3, 4), s.randn(4, 2)), kw={"beta": 0.5}),
    R("addmv", lambda s: (s.randn(3), s.randn(3, 4), s.randn(4)), kw={"alpha": 2}),
    R("addbmm", lambda s: (s.randn(3, 2), s.randn(2, 3, 4), s.randn(2, 4, 2))),
    R("baddbmm", lambda s: (s.randn(3, 2), s.randn(2, 3, 4), s.randn(2, 4, 2))),
    R("addr", lambda s: (s.randn(3, 4), s.randn(3), s.randn(4))),
    R("addmm_", lambda s: (s.randn(3, 2), s.randn(3, 4), s.randn(4, 2)), kw={"beta": 0.5}),
    R("addmv_", lambda s: (s.randn(3), s.randn(3, 4), s.randn(4))),
    R("addbmm_", lambda s: (s.randn(3, 2), s.randn(2, 3, 4), s.randn(2, 4, 2))),
    R("baddbmm_", lambda s: (s.randn(2, 3, 2), s.randn(2, 3, 4), s.randn(2, 4, 2))),
    R("addr_", lambda s: (s.randn(3, 4), s.randn(3), s.randn(4))),
    R("tensordot", lambda s: (s.randn(2, 3, 4), s.randn(4, 3), [1, 2], [1, 0])),
    R("kron", lambda s: (s.randn(2, 3), s.randn(2, 2))),
    R("linalg_cross", lambda s: (s.randn(2, 3), s.randn(1, 3))),
    R("cross", lambda s: (s.randn(2, 3), s.randn(2, 3), 1)),
    R("cdist", lambda s: (s.randn(3, 2), s.randn(4, 2))),
    *[R(n, lambda s: (s.randn(3, 3), 3)) for n in ("linalg_matrix_power", "matrix_power")],
    *[R(n, lambda s: ([s.randn(2, 3), s.randn(3, 4), s.randn(4, 2)],))
      for n in ("linalg_multi_dot", "chain_matmul")],
    R("linalg_vecdot", lambda s: (s.randn(3, 4), s.randn(4))),
    R("einsum", lambda s: ("ij,jk->ik", [s.randn(3, 4), s.randn(4, 2)])),
    *[R(n, lambda s: (s.spd(3),)) for n in (
        "linalg_inv", "inverse", "linalg_det", "det", "linalg_slogdet", "slogdet", "logdet",
        "linalg_eigvals", "linalg_pinv", "pinverse", "linalg_matrix_rank", "linalg_cond")],
    *[R(n, lambda s: (s.spd(3),), sym=True) for n in ("linalg_cholesky", "cholesky",
                                                      "linalg_eigvalsh")],
    R("linalg_eigh", lambda s: (s.spd(3),), sym=True, outs=(0,)),
    R("linalg_eig", lambda s: (s.spd(3),), grad=False, outs=(0,)),
    R("linalg_solve", lambda s: (s.spd(3), s.randn(3, 2))),
    R("linalg_solve_triangular", lambda s: (np.triu(s.spd(3)), s.randn(3, 2)),
      kw={"upper": True}),
    R("linalg_qr", lambda s: (s.randn(4, 3),)), R("qr", lambda s: (s.randn(4, 3),)),
    R("linalg_svd", lambda s: (s.randn(4, 3), False), outs=(1,)),
    R("svd", lambda s: (s.randn(4, 3),), outs=(1,)),
    R("linalg_svdvals", lambda s: (s.randn(4, 3),)),
    R("linalg_lstsq", lambda s: (s.randn(4, 3), s.randn(4, 2)), kw={"driver": "gelsd"}),
    R("linalg_vector_norm", lambda s: (s.randn(3, 4), 3, [1])),
    R("linalg_matrix_norm", lambda s: (s.randn(3, 4),)),
    R("linalg_norm", lambda s: (s.randn(3, 4),)),
    # ---- random ---------------------------------------------------------------------------------
    *[R(n, lambda s: ([2, 3],), values=False) for n in ("rand", "randn", "randperm")[:2]],
    R("randperm", lambda s: (5,), values=False),
    *[R(n, X, values=False) for n in ("rand_like", "randn_like")],
    *[R(n, lambda s: (s.rand(3, 4),), values=False) for n in ("bernoulli", "poisson")],
    R("randint", lambda s: (5, [2, 3]), values=False),
    R("randint.low", lambda s: (2, 5, [2, 3]), values=False),
    R("randint_like", lambda s: (s.randn(3, 4), 5), values=False),
    R("randint_like.low_dtype", lambda s: (s.randn(3, 4), 2, 5), values=False),
    R("normal.Tensor_Tensor", lambda s: (s.randn(3, 4), s.pos(4)), values=False),
    R("normal.Tensor_float", lambda s: (s.randn(3, 4), 2.0), values=False),
    R("normal.float_Tensor", lambda s: (1.0, s.pos(3, 4)), values=False),
    R("normal.float_float", lambda s: (1.0, 2.0, [2, 3]), values=False),
    R("bernoulli.p", lambda s: (s.randn(3, 4), 0.3), values=False),
    R("bernoulli_.Tensor", lambda s: (s.randn(3, 4), s.rand(4)), values=False),
    R("bernoulli_.float", lambda s: (s.randn(3, 4), 0.3), values=False),
    R("multinomial", lambda s: (s.pos(2, 5), 3), values=False),
    *[R(n, X, values=False) for n in ("uniform_", "normal_", "exponential_", "log_normal_",
                                     "cauchy_", "random_")],
    R("geometric_", lambda s: (s.randn(3, 4), 0.3), values=False),
    R("random_.from", lambda s: (s.randn(3, 4), 2, 9), values=False),
    R("random_.to", lambda s: (s.randn(3, 4), 9), values=False),
]



def _log_softmax(a):
    return a - np.log(np.exp(a).sum(-1, keepdims=True))


def _stats(x, kind):
    """(input, ...saved statistics...) as the norm forwards save them."""
    eps = 1e-5
    if kind == "group":  # x (N, C, HxW) in 2 groups: mean, rstd (N, group)
        g = x.reshape(2, 2, -1)
        return x, g.mean(-1), 1 / np.sqrt(g.var(-1) + eps)
    if kind == "batch":  # weight, running_mean, running_var, save_mean, save_invstd
        m, v = x.mean((0, 2)), x.var((0, 2))
        return x, np.ones(3) * 1.5, m, v, m, 1 / np.sqrt(v + eps)
    m, v = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)  # layer norm over the last dim
    return x, [x.shape[-1]], m, 1 / np.sqrt(v + eps)


def _unpool_idx(s, *shape):  # valid max_unpool indices for kernel 2, stride 2 along the last dim
    return 2 * np.arange(shape[-1]) + s.int(*shape, hi=2)


NN = [
    R("linear", lambda s: (s.randn(2, 3), s.randn(4, 3), s.randn(4))),
    R("bilinear", lambda s: (s.randn(2, 3), s.randn(2, 2), s.randn(4, 3, 2), s.randn(4))),
    R("constant_pad_nd", lambda s: (s.randn(2, 3), [1, 2], 0.5)),
    *[R("_pad_index", lambda s, m=m: (s.randn(1, 2, 4), [1, 2], m), id=f"_pad_index_{m}",
        ref=lambda x, p, m: _F("pad")(x, p, mode=m)) for m in ("reflect", "replicate",
                                                              "circular")],
    R("_pad_index_backward", lambda s: (s.randn(1, 2, 7), [1, 2, 4], [1, 2], "reflect"),
      ref=False),
    R("pad", lambda s: (s.randn(1, 2, 4), [1, 2], "reflect")),
    R("embedding", lambda s: (s.randn(5, 3), s.int(2, 3))),
    R("embedding_dense_backward", lambda s: (s.randn(2, 3, 4), s.int(2, 3), 5, -1, False)),
    R("embedding_renorm_", lambda s: (s.randn(5, 3), s.int(4), 1.0, 2.0)),
    R("one_hot", lambda s: (s.int(4), 6)),
    R("pixel_shuffle", lambda s: (s.randn(1, 4, 2, 3), 2)),
    R("pixel_unshuffle", lambda s: (s.randn(1, 1, 4, 2), 2)),
    R("glu", lambda s: (s.randn(3, 4), -1)),
    *[R(n, lambda s: (s.randn(2, 3, 4), 0.5, True), values=False, grad=False) for n in (
        "dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout")],
    R("scaled_dot_product_attention", lambda s: (s.randn(1, 2, 3, 4), s.randn(1, 2, 5, 4),
                                                 s.randn(1, 2, 5, 2))),
    R("_fused_attention", lambda s: (s.randn(1, 2, 3, 4), s.randn(1, 2, 5, 4),
                                     s.randn(1, 2, 5, 4), None, True, 0.5),
      ref=lambda q, k, v, m, c, sc: (
          _F("scaled_dot_product_attention")(q, k, v, is_causal=c, scale=sc),
          (q @ k.transpose(-2, -1) * sc).masked_fill(
              __import__("torch").ones(3, 5).tril().logical_not(), float("-inf")).logsumexp(-1)),
      gout=1),
    R("_fused_attention_backward", lambda s: _attn_bwd_args(
        s, np.arange(5) <= np.arange(3)[:, None] + 1, 0.5), ref=False, grad=False),
    R("_nn_normalize", lambda s: (s.randn(3, 4),), ref=_F("normalize")),
    R("cosine_similarity", lambda s: (s.randn(3, 4), s.randn(3, 4))),
    R("pairwise_distance", lambda s: (s.randn(3, 4), s.randn(3, 4))),
    R("_embedding_bag", lambda s: (s.randn(5, 3), s.int(6), np.array([0, 2, 2])), outs=(0,)),
    R("_embedding_bag_backward_ember", lambda s: (
        s.randn(3, 3), s.randn(5, 3), s.int(6), np.array([0, 0, 2, 2, 2, 2]), np.array([2, 0, 4]),
        np.zeros((3, 3), "int64"), False, 0, s.rand(6), -1), ref=False),
    R("convolution", lambda s: (s.randn(1, 2, 5, 5), s.randn(3, 2, 3, 3), s.randn(3), [1, 1],
                                [1, 1], [1, 1], False, [0, 0], 1)),
    R("convolution", lambda s: (s.randn(1, 4, 3, 3), s.randn(4, 1, 2, 2), s.randn(2), [2, 2],
                                [0, 0], [1, 1], True, [1, 1], 2), id="conv_transposed"),
    R("convolution_backward", lambda s: (
        s.randn(1, 3, 5, 5), s.randn(1, 2, 5, 5), s.randn(3, 2, 3, 3), [3], [1, 1], [1, 1],
        [1, 1], False, [0, 0], 1, [True, True, True])),
    R("conv1d", lambda s: (s.randn(1, 2, 6), s.randn(3, 2, 3), s.randn(3), [2])),
    R("conv2d", lambda s: (s.randn(1, 2, 4, 4), s.randn(3, 2, 3, 3), None, [1, 1], [1, 1])),
    R("conv3d", lambda s: (s.randn(1, 2, 3, 3, 3), s.randn(2, 2, 2, 2, 2))),
    R("conv_transpose1d", lambda s: (s.randn(1, 2, 4), s.randn(2, 3, 3), s.randn(3), [2])),
    R("conv_transpose2d", lambda s: (s.randn(1, 2, 3, 3), s.randn(2, 3, 2, 2))),
    R("conv_transpose3d", lambda s: (s.randn(1, 2, 2, 2, 2), s.randn(2, 1, 2, 2, 2))),
    R("im2col", lambda s: (s.randn(1, 2, 4, 4), [2, 2], [1, 1], [1, 1], [2, 2])),
    R("col2im", lambda s: (s.randn(1, 8, 9), [4, 4], [2, 2], [1, 1], [1, 1], [2, 2])),
    R("_nn_unfold", lambda s: (s.randn(1, 2, 4, 4), [2, 2], 1, 1, 2), ref=_F("unfold")),
    R("_nn_fold", lambda s: (s.randn(1, 8, 9), [4, 4], [2, 2], 1, 1, 2), ref=_F("fold")),
    R("_pool_gather", lambda s: (s.randn(1, 2, 4, 4), s.int(1, 2, 2, 2, hi=16), 2), ref=False),
    R("_pool_scatter", lambda s: (s.randn(1, 2, 2, 2), s.randn(1, 2, 4, 4),
                                  s.perm(16)[:8].reshape(1, 2, 2, 2), 2), ref=False),
    R("max_pool1d_with_indices", lambda s: (s.distinct(1, 2, 6), [2])),
    R("max_pool2d_with_indices", lambda s: (s.distinct(1, 2, 5, 5), [2, 2], [2, 2], [1, 1])),
    R("max_pool3d_with_indices", lambda s: (s.distinct(1, 1, 4, 4, 4), [2, 2, 2])),
    R("_avg_pool_backward", lambda s: (s.randn(1, 2, 3, 3), s.randn(1, 2, 5, 5), [2, 2], [2, 2],
                                       [1, 1], False, True, None), ref=False),
    R("avg_pool1d", lambda s: (s.randn(1, 2, 6), [2])),
    R("avg_pool2d", lambda s: (s.randn(1, 2, 5, 5), [3, 3], [2, 2], [1, 1], True, False)),
    R("avg_pool3d", lambda s: (s.randn(1, 1, 4, 4, 4), [2, 2, 2])),
    R("_adaptive_avg_pool", lambda s: (s.randn(1, 2, 5, 5), [2, 3]),
      ref=_F("adaptive_avg_pool2d")),
    R("_adaptive_avg_pool_backward", lambda s: (s.randn(1, 2, 2, 3), [5, 5]), ref=False),
    R("_adaptive_max_pool", lambda s: (s.distinct(1, 2, 5, 5), [2, 3]),
      ref=lambda x, o: _F("adaptive_max_pool2d")(x, o, return_indices=True)),
    *[R(f"adaptive_avg_pool{n}d", lambda s, n=n: (s.randn(1, 2, *[5] * n), [3] * n))
      for n in (1, 2, 3)],
    *[R(f"adaptive_max_pool{n}d", lambda s, n=n: (s.distinct(1, 2, *[5] * n), [3] * n))
      for n in (1, 2, 3)],
    R("native_layer_norm", lambda s: (s.randn(2, 3, 4), [4], s.randn(4), s.randn(4), 1e-5),
      gout=1),
    # backward ops take the forward's saved statistics: consistent ones, and no finite
    # differences (the derivative formulas treat mean/rstd as functions of the input)
    R("native_layer_norm_backward", lambda s: (
        s.randn(2, 3, 4), *_stats(s.randn(2, 3, 4), (2,)), s.randn(4), s.randn(4),
        [True, True, True]), fd=False),
    R("layer_norm", lambda s: (s.randn(2, 3, 4), [4], s.randn(4), s.randn(4))),
    R("native_group_norm", lambda s: (s.randn(2, 4, 3), s.randn(4), s.randn(4), 2, 4, 3, 2,
                                      1e-5), gout=1),
    R("native_group_norm_backward", lambda s: (
        s.randn(2, 4, 3), *_stats(s.randn(2, 4, 3), "group"), s.randn(4), 2, 4, 3, 2,
        [True, True, True]), fd=False),
    R("group_norm", lambda s: (s.randn(2, 4, 3), 2, s.randn(4), s.randn(4))),
    R("native_batch_norm_backward", lambda s: (
        s.randn(2, 3, 4), *_stats(s.randn(2, 3, 4), "batch"), True, 1e-5, [True, True, True]),
      fd=False),
    R("_native_batch_norm_legit_functional", lambda s: (
        s.randn(2, 3, 4), s.randn(3), s.randn(3), s.randn(3), s.pos(3), True, 0.1, 1e-5),
      gout=1),
    R("native_batch_norm", lambda s: (s.randn(2, 3, 4), s.randn(3), s.randn(3), s.randn(3),
                                      s.pos(3), True, 0.1, 1e-5), gout=1),
    R("batch_norm", lambda s: (s.randn(2, 3, 4), s.randn(3), s.randn(3), s.randn(3), s.pos(3),
                               False, 0.1, 1e-5, False)),
    R("instance_norm", lambda s: (s.randn(2, 3, 4), s.randn(3), s.randn(3), None, None, True,
                                  0.1, 1e-5, False)),
    R("rms_norm", lambda s: (s.randn(2, 3, 4), [4], s.randn(4))),
    R("_nn_local_response_norm", lambda s: (s.randn(1, 4, 3, 3), 2),
      ref=_F("local_response_norm")),
    R("nll_loss_forward", lambda s: (np.log(s.prob(3, 5)), s.int(3), s.pos(5), 1, -100)),
    R("nll_loss_backward", lambda s: (
        np.array(0.7), s.randn(3, 5), s.int(3), None, 1, -100, np.array(3.0))),
    R("nll_loss_nd", lambda s: (s.randn(3, 5), s.int(3))),
    R("cross_entropy_loss", lambda s: (s.randn(3, 5), s.int(3), None, 1, -100, 0.1)),
    # cross_entropy's eager CPU op (log_softmax + nll_loss) and its one-pass backward
    R("_log_softmax_nll", lambda s: (s.randn(3, 5), s.int(3), s.pos(5), 1, -100),
      ref=lambda x, t, w, r, ii: _torch().ops.aten.nll_loss_forward(
          _torch().log_softmax(x, 1), t, w, r, ii)),
    R("_log_softmax_nll_backward", lambda s: (
        np.array(0.7), s.randn(3, 5), s.int(3), None, 1, -100, np.array(3.0)),
      ref=lambda g, x, t, w, r, ii, tw: _torch().ops.aten._log_softmax_backward_data(
          _torch().ops.aten.nll_loss_backward(g, _torch().log_softmax(x, 1), t, w, r, ii, tw),
          _torch().log_softmax(x, 1), 1, x.dtype)),
    *binary("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss",
            sample=lambda s: (s.randn(3, 4), s.randn(3, 4))),
    R("binary_cross_entropy", lambda s: (s.prob(3, 4), s.rand(3, 4))),
    R("binary_cross_entropy_with_logits", lambda s: (s.randn(3, 4), s.rand(3, 4), None,
                                                     s.pos(4))),
    R("kl_div", lambda s: (s.randn(3, 4), s.prob(3, 4))),
    R("cosine_embedding_loss", lambda s: (s.randn(3, 4), s.randn(3, 4),
                                          np.array([1.0, -1.0, 1.0]))),
    R("margin_ranking_loss", lambda s: (s.randn(3), s.randn(3), np.array([1.0, -1.0, 1.0]))),
    R("hinge_embedding_loss", lambda s: (s.randn(3, 4), np.sign(s.randn(3, 4)))),
    R("multilabel_soft_margin_loss", lambda s: (s.randn(3, 4), s.int(3, 4, hi=2)),
      ref=_F("multilabel_soft_margin_loss")),
    R("poisson_nll_loss", lambda s: (s.randn(3, 4), s.pos(3, 4), True, False, 1e-8, 1)),
    R("gaussian_nll_loss", lambda s: (s.randn(3, 4), s.randn(3, 4), s.pos(3, 4)),
      ref=_F("gaussian_nll_loss")),
    R("triplet_margin_loss", lambda s: (s.randn(3, 4), s.randn(3, 4), s.randn(3, 4))),
    *[R("_upsample", lambda s, m=m: (s.randn(1, 2, 3, 3), [5, 4], m, False, None),
        id=f"_upsample_{m}", ref=lambda x, o, m, ac, sc: _F("interpolate")(
            x, size=o, mode="bi" + m, align_corners=ac)) for m in ("linear", "cubic")],
    R("_upsample", lambda s: (s.randn(1, 2, 3, 3), [5, 4], "nearest", None, None),
      ref=lambda x, o, m, ac, sc: _F("interpolate")(x, size=o, mode=m), id="_upsample_nearest"),
    R("_upsample_backward", lambda s: (s.randn(1, 2, 5, 4), [3, 3], "linear", False, None),
      ref=False),
    R("grid_sampler", lambda s: (s.randn(1, 2, 4, 4), s.unit(1, 3, 3, 2), 0, 0, False)),
    R("grid_sampler_2d_backward", lambda s: (
        s.randn(1, 2, 3, 3), s.randn(1, 2, 4, 4), s.unit(1, 3, 3, 2), 0, 0, False,
        [True, True])),
    R("affine_grid_generator", lambda s: (s.randn(1, 2, 3), [1, 2, 3, 3], False)),
    *[R(n, lambda s: (s.randn(1, 4, 2, 2), 2)) for n in ("channel_shuffle",
                                                         "native_channel_shuffle")],
    R("pdist", lambda s: (s.randn(4, 3),)),
    R("_max_unpool_ember", lambda s: (s.randn(1, 2, 3), _unpool_idx(s, 1, 2, 3), [6], 1),
      ref=False),
    *[R(f"_lp_pool{n}d", lambda s, n=n: (s.pos(1, 2, *[4] * n), 2.0, [2] * n),
        ref=lambda x, p, k, n=n: _F(f"lp_pool{n}d")(x, p, k[0] if n == 1 else k))
      for n in (1, 2, 3)],
    R("_max_unpool1d", lambda s: (s.randn(1, 2, 3), _unpool_idx(s, 1, 2, 3), [2]),
      ref=_F("max_unpool1d")),
    R("_max_unpool2d", lambda s: (s.randn(1, 1, 2, 2), np.array([[[[0, 3], [9, 14]]]]), [2, 2]),
      ref=_F("max_unpool2d")),
    R("_max_unpool3d", lambda s: (s.randn(1, 1, 1, 1, 2), np.array([[[[[0, 3]]]]]),
                                  [2, 2, 2]), ref=_F("max_unpool3d")),
    R("multi_margin_loss", lambda s: (s.randn(3, 5), s.int(3))),
    R("multilabel_margin_loss", lambda s: (s.randn(3, 4), np.array(
        [[3, 0, -1, 1], [1, 2, 3, -1], [-1, 0, 0, 0]]))),
    R("rrelu", lambda s: (s.randn(3, 4), 0.125, 0.3, False)),
    # PyTorch's CTC gradient assumes log_probs come from log_softmax (it folds in the softmax
    # Jacobian), so it is not the derivative w.r.t. free log_probs: compared with torch only
    R("_ctc_loss", lambda s: (_log_softmax(s.randn(5, 2, 4)), s.int(2, 2, lo=1, hi=4), [5, 4],
                              [2, 1]), rtol=1e-4, outs=(0,), gout=1, fd=False),
    R("_ctc_loss_backward_ember", lambda s: (
        s.randn(2), np.log(s.prob(5, 2, 4)), s.int(2, 2, lo=1, hi=4), [5, 4], [2, 1],
        s.pos(2), s.randn(5, 2, 5), 0, False), ref=False, grad=False),
]
RECORDS += NN

# ---- fft (complex samples: float64 parts, cast to complex64/128 with the dtype under test) ----
def _cplx(s, *shape):
    return s.randn(*shape) + 1j * s.randn(*shape)


FFT = [
    R("_fft_c2c", lambda s: (_cplx(s, 3, 4), [1], 0, True)),
    R("_fft_c2c", lambda s: (_cplx(s, 3, 4), [0, 1], 2, False), id="_fft_c2c_inverse"),
    R("_fft_r2c", lambda s: (s.randn(3, 6), [1], 1, True)),
    R("_fft_r2c", lambda s: (s.randn(3, 6), [0, 1], 0, False), id="_fft_r2c_twosided"),
    R("_fft_c2r", lambda s: (_cplx(s, 3, 4), [1], 2, 7)),
    *[R(f"fft_{n}", lambda s: (_cplx(s, 3, 5), None, -1, "ortho")) for n in
      ("fft", "ifft", "irfft", "hfft")],
    *[R(f"fft_{n}", lambda s: (s.randn(3, 5), 6, 0, "forward")) for n in ("rfft", "ihfft")],
    *[R(f"fft_{n}", lambda s: (_cplx(s, 3, 4, 5), [4, 3], [0, 2], None)) for n in
      ("fft2", "ifft2", "fftn", "ifftn", "irfft2", "irfftn")],
    *[R(f"fft_{n}", lambda s: (s.randn(3, 4, 5), None)) for n in ("rfft2", "rfftn")],
    *[R(f"fft_{n}", lambda s: (_cplx(s, 3, 4, 5), [4, 6], [-2, -1], "ortho")) for n in
      ("hfft2", "hfftn")],
    *[R(f"fft_{n}", lambda s: (s.randn(3, 4, 5), None, [0, 2], "forward")) for n in
      ("ihfft2", "ihfftn")],
    R("fft_fftfreq", lambda s: (5, 0.5)),
    R("fft_rfftfreq", lambda s: (6,)),
    R("fft_fftshift", lambda s: (s.randn(3, 4), None)),
    R("fft_ifftshift", lambda s: (s.randn(3, 5), [1])),
]
RECORDS += FFT

# ---- special functions --------------------------------------------------------------------------
SPECIAL = [
    *unary("i0", "special_i0e", "special_i1", "special_i1e", "special_erfcx",
           "special_log_ndtr", "special_ndtr", "sinc", "special_bessel_j0",
           "special_bessel_j1", "special_modified_bessel_i0", "special_modified_bessel_i1",
           "special_spherical_bessel_j0", "special_airy_ai"),
    *unary("special_bessel_y0", "special_bessel_y1", "special_modified_bessel_k0",
           "special_modified_bessel_k1", "special_scaled_modified_bessel_k0",
           "special_scaled_modified_bessel_k1", "special_entr", sample=lambda s: (s.pos(3, 4),)),
    R("special_ndtri", lambda s: (s.prob(3, 4),)),
    R("special_xlog1py", lambda s: (s.randn(3, 4), s.pos(4))),
    R("special_zeta", lambda s: (s.pos(3, 4) + 1.5, s.pos(4)), fd=True),
    R("igamma", lambda s: (s.pos(3, 4), s.pos(4))),
    R("igammac", lambda s: (s.pos(3, 4), s.pos(4))),
    R("mvlgamma", lambda s: (s.pos(3, 4) + 2, 3)),
    *[R(f"special_{n}", lambda s: (s.unit(3, 4), s.int(4, lo=0, hi=7)), rtol=1e-5, atol=1e-5)
      for n in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
                "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
                "shifted_chebyshev_polynomial_w", "hermite_polynomial_h",
                "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p")],
]
RECORDS += SPECIAL
