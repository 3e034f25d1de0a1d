"""ember op -> ONNX nodes: one small function per op of the traced graph (make_fx's table ops),
each writing nodes through a GraphBuilder. An op without an entry stops the export with its
name."""
from __future__ import annotations

import math

import numpy as np

_NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64,
       "int32": np.int32, "bool": np.bool_, "int8": np.int8, "uint8": np.uint8}


class OnnxExporterError(RuntimeError):
    """Raised when ember cannot export a model to ONNX."""


class GraphBuilder:
    """Collects ONNX nodes and initializers; names are unique strings."""

    def __init__(self, helper, numpy_helper):
        self.h, self.nh = helper, numpy_helper
        self.nodes, self.inits = [], []
        self._n = 0

    def fresh(self, base: str) -> str:
        self._n += 1
        return f"{base}_{self._n}"

    def const(self, value, dtype=np.float32, name="const") -> str:
        arr = np.asarray(value, dtype=dtype)
        n = self.fresh(name)
        self.inits.append(self.nh.from_array(arr, n))
        return n

    def add(self, op_type: str, inputs, n_out: int = 1, **attrs):
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(self.h.make_node(op_type, list(inputs), outs,
                                           name=self.fresh("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs


def _ints(x, n=2):
    return list(x) if isinstance(x, (list, tuple)) else [x] * n


def _scalar_or(b, v, ref_dtype):
    """A value name for a tensor argument or a Python scalar (as the other operand's dtype)."""
    return v if isinstance(v, str) else b.const(v, ref_dtype)


# each rule: (builder, args as ONNX names or Python values, shapes/dtypes of the tensor args,
# the node's output info) -> output name(s)
def _linear(b, a, info):
    x, w, bias = a[0], a[1], a[2] if len(a) > 2 else None
    if len(info.shape(0)) == 2 and bias is not None:
        return b.add("Gemm", [x, w, bias], transB=1)
    y = b.add("MatMul", [x, b.add("Transpose", [w], perm=[1, 0])])
    return y if bias is None else b.add("Add", [y, bias])


def _binary(op_type):
    def rule(b, a, info):
        dt = _NP[info.out_dtype]
        x, y = _scalar_or(b, a[0], dt), _scalar_or(b, a[1], dt)
        if len(a) > 2 and a[2] not in (1, None) and op_type in ("Add", "Sub"):
            y = b.add("Mul", [y, b.const(a[2], dt)])
        return b.add(op_type, [x, y])
    return rule


def _unary(op_type):
    return lambda b, a, info: b.add(op_type, [a[0]])


def _gelu(b, a, info):
    x, dt = a[0], _NP[info.out_dtype]
    if len(a) > 1 and a[1] == "tanh":  # 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))
        inner = b.add("Mul", [b.const(math.sqrt(2 / math.pi), dt), b.add(
            "Add", [x, b.add("Mul", [b.const(0.044715, dt), b.add("Pow", [x, b.const(3, dt)])])])])
        t = b.add("Tanh", [inner])
    else:                              # 0.5x(1 + erf(x / sqrt(2)))
        t = b.add("Erf", [b.add("Div", [x, b.const(math.sqrt(2.0), dt)])])
    return b.add("Mul", [b.add("Mul", [x, b.const(0.5, dt)]), b.add("Add", [t, b.const(1, dt)])])


def _silu(b, a, info):
    return b.add("Mul", [a[0], b.add("Sigmoid", [a[0]])])


def _softmax(op_type):
    return lambda b, a, info: b.add(op_type, [a[0]], axis=int(a[1]))


def _conv(b, a, info):
    x, w, bias = a[0], a[1], a[2]
    nd = len(info.shape(1)) - 2
    stride = _ints(a[3] if len(a) > 3 else 1, nd)
    pad = a[4] if len(a) > 4 else 0
    if isinstance(pad, str):
        raise OnnxExporterError(f"conv: padding={pad!r} is not exported (give the sizes)")
    pad = _ints(pad, nd)
    dil = _ints(a[5] if len(a) > 5 else 1, nd)
    groups = a[6] if len(a) > 6 else 1
    ins = [x, w] + ([bias] if bias is not None else [])
    return b.add("Conv", ins, strides=stride, pads=pad + pad, dilations=dil, group=int(groups))


def _batch_norm(b, a, info):
    x, w, bias, mean, var = a[:5]
    c = info.shape(0)[1]
    dt = _NP[info.out_dtype]
    w = w if w is not None else b.const(np.ones(c), dt)
    bias = bias if bias is not None else b.const(np.zeros(c), dt)
    return b.add("BatchNormalization", [x, w, bias, mean, var], epsilon=float(a[7]))


def _layer_norm(b, a, info):
    x, ns = a[0], list(a[1])
    w = a[2] if len(a) > 2 else None
    bias = a[3] if len(a) > 3 else None
    eps = a[4] if len(a) > 4 else 1e-5
    dt = _NP[info.out_dtype]
    w = w if w is not None else b.const(np.ones(ns), dt)
    ins = [x, w] + ([bias] if bias is not None else [])
    return b.add("LayerNormalization", ins, axis=-len(ns), epsilon=float(eps))


def _max_pool(b, a, info):
    nd = len(info.shape(0)) - 2
    k = _ints(a[1], nd)
    s = _ints(a[2] if len(a) > 2 and a[2] not in (None, []) else k, nd)
    p = _ints(a[3] if len(a) > 3 else 0, nd)
    d = _ints(a[4] if len(a) > 4 else 1, nd)
    ceil = int(bool(a[5])) if len(a) > 5 else 0
    y = b.add("MaxPool", [a[0]], kernel_shape=k, strides=s, pads=p + p, dilations=d,
              ceil_mode=ceil)
    return [y, None]  # (values, indices): the indices are not exported


def _avg_pool(b, a, info):
    nd = len(info.shape(0)) - 2
    k = _ints(a[1], nd)
    s = _ints(a[2] if len(a) > 2 and a[2] not in (None, []) else k, nd)
    p = _ints(a[3] if len(a) > 3 else 0, nd)
    ceil = int(bool(a[4])) if len(a) > 4 else 0
    pad_count = int(bool(a[5])) if len(a) > 5 else 1
    return b.add("AveragePool", [a[0]], kernel_shape=k, strides=s, pads=p + p, ceil_mode=ceil,
                 count_include_pad=pad_count)


def _adaptive_avg_pool(b, a, info):
    if any(o != 1 for o in _ints(a[1], len(info.shape(0)) - 2)):
        raise OnnxExporterError("adaptive_avg_pool: only output size 1 is exported")
    return b.add("GlobalAveragePool", [a[0]])


def _shape_const(b, in_shape, out_shape):
    # a dim equal to the input's at the same position copies it (0): a dynamic batch stays so
    dims = [0 if i < len(in_shape) and o == in_shape[i] and o != 0 else o
            for i, o in enumerate(out_shape)]
    return b.const(dims, np.int64, "shape")


def _reshape(b, a, info):
    dims = a[1] if len(a) > 1 and isinstance(a[1], (list, tuple)) else None
    if dims is not None and any(isinstance(d, str) for d in dims):
        # sizes computed in the graph (a symbolic trace): Concat of 1-element pieces
        parts = [d if isinstance(d, str) else b.const([int(d)], np.int64, "dim") for d in dims]
        return b.add("Reshape", [a[0], b.add("Concat", parts, axis=0)])
    if dims is not None and -1 in dims:  # the requested -1 stays: a dynamic dim folds into it
        return b.add("Reshape", [a[0], _shape_const(b, info.shape(0), dims)])
    return b.add("Reshape", [a[0], _shape_const(b, info.shape(0), info.out_shape)])


def _flatten(b, a, info):
    start = a[1] if len(a) > 1 else 0
    end = a[2] if len(a) > 2 else -1
    rank = len(info.shape(0))
    if rank and start % rank == 1 and end % rank == rank - 1:
        return b.add("Flatten", [a[0]], axis=1)
    return _reshape(b, a, info)


def _transpose(b, a, info):
    rank = len(info.shape(0))
    perm = list(range(rank))
    i, j = a[1] % rank, a[2] % rank
    perm[i], perm[j] = perm[j], perm[i]
    return b.add("Transpose", [a[0]], perm=perm)


def _permute(b, a, info):
    rank = len(info.shape(0))
    return b.add("Transpose", [a[0]], perm=[d % rank for d in a[1]])


def _t(b, a, info):
    return b.add("Transpose", [a[0]], perm=[1, 0]) if len(info.shape(0)) == 2 else a[0]


def _chunk(b, a, info):
    dim = a[2] if len(a) > 2 else 0  # (a[1]: chunk count or split size; the outputs tell)
    sizes = [tuple(s)[dim % len(s)] for s in info.out_shapes]
    return b.add("Split", [a[0], b.const(sizes, np.int64, "split")], n_out=len(sizes),
                 axis=int(dim))


def _sdpa(b, a, info):
    q, k, v = a[0], a[1], a[2]
    mask = a[3] if len(a) > 3 else None
    is_causal = bool(a[5]) if len(a) > 5 else False
    scale = a[6] if len(a) > 6 else None
    qs, ks = info.shape(0), info.shape(1)
    dt = _NP[info.out_dtype]
    scale = scale if scale is not None else 1.0 / math.sqrt(qs[-1])
    rank = len(ks)
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    s = b.add("Mul", [b.add("MatMul", [q, b.add("Transpose", [k], perm=perm)]),
                      b.const(scale, dt)])
    if is_causal:
        lq, lk = qs[-2], ks[-2]
        s = b.add("Add", [s, b.const(np.where(np.tril(np.ones((lq, lk), bool)), 0.0, -np.inf),
                                     dt)])
    if mask is not None:
        if info.dtype(3) == "bool":
            s = b.add("Where", [mask, s, b.const(-np.inf, dt)])
        else:
            s = b.add("Add", [s, mask])
    return b.add("MatMul", [b.add("Softmax", [s], axis=-1), v])


def _cat(b, a, info):
    return b.add("Concat", list(a[0]), axis=int(a[1] if len(a) > 1 else 0))


def _unsqueeze(b, a, info):
    return b.add("Unsqueeze", [a[0], b.const([a[1]], np.int64, "axes")])


def _reduce(op_type):
    def rule(b, a, info):
        dims = a[1] if len(a) > 1 else None
        keep = int(bool(a[2])) if len(a) > 2 else 0
        if dims is None:
            return b.add(op_type, [a[0]], keepdims=keep)
        dims = [dims] if isinstance(dims, int) else list(dims)
        return b.add(op_type, [a[0], b.const(dims, np.int64, "axes")], keepdims=keep)
    return rule


def _embedding(b, a, info):
    return b.add("Gather", [a[0], a[1]], axis=0)


def _identity(b, a, info):
    return a[0]


def _dropout(b, a, info):
    if len(a) > 2 and a[2]:
        raise OnnxExporterError("dropout in training mode is not exported (call model.eval())")
    return a[0]


def _to_copy(b, a, info):
    from onnx import helper
    return b.add("Cast", [a[0]], to=helper.np_dtype_to_tensor_dtype(
        np.dtype(_NP[info.out_dtype])))


def _rsqrt(b, a, info):
    return b.add("Reciprocal", [b.add("Sqrt", [a[0]])])


def _pow(b, a, info):
    dt = _NP[info.out_dtype]
    return b.add("Pow", [_scalar_or(b, a[0], dt), _scalar_or(b, a[1], dt)])


def _matmul(b, a, info):
    return b.add("MatMul", [a[0], a[1]])


def _addmm(b, a, info):
    beta = a[3] if len(a) > 3 else 1
    alpha = a[4] if len(a) > 4 else 1
    return b.add("Gemm", [a[1], a[2], a[0]], alpha=float(alpha), beta=float(beta))


def _hardtanh(b, a, info):
    dt = _NP[info.out_dtype]
    lo = a[1] if len(a) > 1 else -1.0
    hi = a[2] if len(a) > 2 else 1.0
    return b.add("Clip", [a[0], b.const(lo, dt), b.const(hi, dt)])


def _masked_fill(b, a, info):
    dt = _NP[info.out_dtype]
    return b.add("Where", [a[1], _scalar_or(b, a[2], dt), a[0]])


def _compare(op_type):
    def rule(b, a, info):
        dt = _NP[info.dtype(0)] if info.dtype(0) else np.float32
        return b.add(op_type, [a[0], _scalar_or(b, a[1], dt)])
    return rule


def _cross_entropy(b, a, info):
    weight = a[2] if len(a) > 2 else None
    reduction = {0: "none", 1: "mean", 2: "sum"}[a[3] if len(a) > 3 else 1]
    ignore = a[4] if len(a) > 4 else -100
    if (len(a) > 5 and a[5]) or info.dtype(1) not in ("int64", "int32"):
        raise OnnxExporterError("cross_entropy: only class-index targets without label "
                                "smoothing are exported")
    ins = [a[0], a[1]] + ([weight] if weight is not None else [])
    return b.add("SoftmaxCrossEntropyLoss", ins, reduction=reduction, ignore_index=int(ignore))


RULES = {
    "linear": _linear, "add": _binary("Add"), "sub": _binary("Sub"), "mul": _binary("Mul"),
    "div": _binary("Div"), "relu": _unary("Relu"), "sigmoid": _unary("Sigmoid"),
    "tanh": _unary("Tanh"), "exp": _unary("Exp"), "log": _unary("Log"), "sqrt": _unary("Sqrt"),
    "neg": _unary("Neg"), "abs": _unary("Abs"), "erf": _unary("Erf"), "rsqrt": _rsqrt,
    "gelu": _gelu, "silu": _silu, "softmax": _softmax("Softmax"),
    "_softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
    "conv2d": _conv, "conv1d": _conv, "batch_norm": _batch_norm,
    "layer_norm": _layer_norm, "max_pool2d_with_indices": _max_pool,
    "max_pool2d": lambda b, a, i: _max_pool(b, a, i)[0], "avg_pool2d": _avg_pool,
    "adaptive_avg_pool2d": _adaptive_avg_pool, "reshape": _reshape, "view": _reshape,
    "flatten": _flatten, "transpose": _transpose, "permute": _permute, "t": _t,
    "chunk": _chunk, "split": _chunk, "scaled_dot_product_attention": _sdpa, "cat": _cat,
    "unsqueeze": _unsqueeze, "mean": _reduce("ReduceMean"), "sum": _reduce("ReduceSum"),
    "embedding": _embedding, "clone": _identity, "contiguous": _identity, "detach": _identity,
    "alias": _identity, "dropout": _dropout, "_to_copy": _to_copy, "pow": _pow,
    "matmul": _matmul, "mm": _matmul, "bmm": _matmul, "addmm": _addmm, "hardtanh": _hardtanh,
    "relu6": lambda b, a, i: _hardtanh(b, [a[0], 0.0, 6.0], i),
    "masked_fill": _masked_fill, "eq": _compare("Equal"), "lt": _compare("Less"),
    "gt": _compare("Greater"), "cross_entropy_loss": _cross_entropy,
    "where": lambda b, a, i: b.add("Where", [a[0], a[1], a[2]]),
}
