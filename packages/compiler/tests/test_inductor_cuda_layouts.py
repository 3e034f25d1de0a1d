"""Compiled CUDA graphs of the GPT's attention and its split/cat backward (issue 15): batched
matmul operands in layouts one strided-batched cuBLASLt call cannot take (heads split out of
one (B, T, 3C) projection: batch dims (B, H) with strides (3TC, D)) are copied once by a Triton
kernel of the graph, never eagerly inside the extern matmul; ones it can take go as they lie;
`cat` and `slice_scatter` are Triton kernels, not extern calls; reductions of few long rows
(bias gradients: `sum(dim=0)` of (B*T, C)) run in two stages, outer reductions over
[RBLOCK, XBLOCK] tiles; cross-entropy's backward is one fused pair of kernels; static
graphs' kernels take their sizes as constexprs. Values and gradients equal eager. On a GPU
in-process, else on the fake device (Triton's interpreter) in a subprocess."""
from cuda_helpers import run_script

SCRIPT = r"""
import math, os, sys
import numpy as np, ember
from ember._inductor import decompositions
from inductor_helpers import Recorder

os.environ["EMBER_FX_GRAPH_CACHE"] = "0"       # compile here, not from an earlier run
F = ember.nn.functional
backend = Recorder()
graphs = backend.graphs

def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a.detach().cpu().float().numpy(), b.detach().cpu().float().numpy(),
                               rtol=tol, atol=tol)

def compiled(fn):
    graphs.clear()
    ember._dynamo.reset()
    return ember.compile(fn, backend=backend)

# ---- attention: no eager copies of matmul operands ----------------------------------------
from ember._device import get_backend
be = get_backend("cuda")
copies = []   # copies of matmul operands made eagerly by the CUDA matmul (ember.cuda.blas)
copy_new, contiguous = be._copy_new, ember.Tensor.contiguous
def _from_blas():
    return sys._getframe(2).f_code.co_filename.endswith("blas.py")
def counted_copy_new(*a, **k):
    if _from_blas():
        copies.append("copy_new")
    return copy_new(*a, **k)
def counted_contiguous(self, *a, **k):
    if _from_blas() and not self.is_contiguous():
        copies.append("contiguous")
    return contiguous(self, *a, **k)

B, T, H, D = 2, 8, 2, 4
C = H * D
def attention(qkv):
    q, k, v = qkv.split(C, dim=2)
    q = q.view(B, T, H, D).transpose(1, 2)    # (B, H, T, D)
    k = k.view(B, T, H, D).transpose(1, 2)
    v = v.view(B, T, H, D).transpose(1, 2)
    att = F.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D)), dim=-1)
    return (att @ v).transpose(1, 2).contiguous().view(B, T, C)

ember.manual_seed(0)
x = ember.randn(B, T, 3 * C, device="cuda", requires_grad=True)
gy = ember.randn(B, T, C, device="cuda")
f = compiled(attention)
f(x).backward(gy)            # compiles forward and backward
x.grad = None
be._copy_new, ember.Tensor.contiguous = counted_copy_new, counted_contiguous
try:
    y = f(x)
    y.backward(gy)
finally:
    be._copy_new, ember.Tensor.contiguous = copy_new, contiguous
assert not copies, copies    # every operand copy is a kernel of the graph
g1 = x.grad.clone()
x.grad = None
y0 = attention(x)
y0.backward(gy)
close(y, y0)
close(g1, x.grad)
assert len(graphs) == 2, graphs   # one graph each way
fw, bw = graphs[0].last, graphs[1].last
# forward: q @ k^T and att @ v extern; backward: four matmuls, the three slice_scatters of
# split's backward one kernel with their sum, no extern call but the matmuls
assert fw.n_extern == 2 and "kernel" in fw.code(), fw.code()
# split's vjp scatters into zeros the backward makes itself (inlined constants): the forward
# neither fills nor saves them
assert "fuses zeros" not in fw.code() and "zeros" not in bw.code().split("def call")[1], \
    fw.code()
assert bw.n_extern == 4, bw.code()
assert "slice_scatter" in bw.code() and "# slice_scatter" not in bw.code(), bw.code()

# operands cuBLASLt takes as they lie are not copied: a (B, H, T, D) contiguous q @ k^T
def scores(q, k):
    return (q @ k.transpose(-2, -1)).relu()
q4, k4 = ember.randn(B, H, T, D, device="cuda"), ember.randn(B, H, T, D, device="cuda")
with ember.no_grad():
    close(compiled(scores)(q4, k4), scores(q4, k4))
c = graphs[-1].last
assert c.n_extern == 1 and c.n_kernels == 1, c.code()   # the matmul, then the relu

# ---- cat and slice_scatter: Triton kernels ------------------------------------------------
a, b = ember.randn(2, 5, 12, device="cuda"), ember.randn(2, 3, 12, device="cuda")
join = lambda a, b: (ember.cat([a.sin(), b * 2, a[:, :1]], dim=1) + 1).relu()
scat = lambda a, b: ember.slice_scatter(a, b.exp(), dim=1, start=1, end=4) * 3
for fn in (join, scat):
    with ember.no_grad():
        close(compiled(fn)(a, b), fn(a, b))
    c = graphs[-1].last
    assert c.n_extern == 0 and c.n_kernels == 1, c.code()

# ---- static graphs: sizes as constexprs (compiled per size), right for each size ------------
graphs.clear()
ember._dynamo.reset()
fs = ember.compile(lambda t: (t * 2).sin() + 1, backend=backend, dynamic=False)
for shape in ((2, 5, 12), (3, 7, 12)):
    t = ember.randn(*shape, device="cuda")
    with ember.no_grad():
        close(fs(t), (t * 2).sin() + 1)
    src = graphs[-1].last.kernel_src
    # (element counts too: masks known per aligned run, loads vectorized; triton.const_numel)
    assert "ks1: tl.constexpr" in src and "xnumel: tl.constexpr" in src and \
        "do_not_specialize=[]" in src, src
    assert "tl.load(p0 + (xindex)" in src, src   # elements in order: the flat index

# ---- cross-entropy's backward: nll_loss_backward fused into log_softmax's backward ---------
logits = ember.randn(2, 6, 40, device="cuda", requires_grad=True)
tgt = ember.randint(0, 40, (2, 6), device="cuda")
tgt[0, 1] = -100                   # an ignored row
ce = lambda l, t: F.cross_entropy(l.view(-1, l.size(-1)), t.view(-1))
compiled(ce)(logits, tgt).backward()
g1 = logits.grad.clone()
logits.grad = None
ce(logits, tgt).backward()
close(g1, logits.grad)
assert graphs[-1].last.n_extern == 0 and graphs[-1].last.n_kernels == 2, graphs[-1].last.code()

# ---- split reductions: few long rows in two stages ----------------------------------------
limits = decompositions.SPLIT_ROWS_MIN, decompositions.SPLIT_ROWS_MIN_COLUMN
decompositions.SPLIT_ROWS_MIN = decompositions.SPLIT_ROWS_MIN_COLUMN = 64   # (4096, 1024)
try:
    rows = ember.randn(256, 6, device="cuda")
    for fn in (lambda t: (t * 2).sum(dim=0), lambda t: t.amax(dim=0, keepdim=True),
               lambda t: t.view(16, 16, 6).mean(dim=(0, 1)), lambda t: t.t().sum(dim=1)):
        with ember.no_grad():
            close(compiled(fn)(rows), fn(rows))
        c = graphs[-1].last
        assert c.n_kernels == 2 and c.n_extern == 0, c.code()   # partials, then their sum
    # outer reductions (terms a row apart) run as [RBLOCK, XBLOCK] column tiles, also fused
    # with what reads them (softmax over dim 0) and with a second reduction (var)
    for fn in (lambda t: ember.softmax(t, dim=0), lambda t: t.var(dim=0)):
        with ember.no_grad():
            close(compiled(fn)(rows), fn(rows))
        assert "[RBLOCK, XBLOCK]" in graphs[-1].last.code(), graphs[-1].last.code()
    short = ember.randn(32, 6, device="cuda")   # rows under SPLIT_ROWS_MIN: one stage
    with ember.no_grad():
        close(compiled(lambda t: t.sum(dim=0))(short), short.sum(dim=0))
    assert graphs[-1].last.n_kernels == 1, graphs[-1].last.code()
finally:
    decompositions.SPLIT_ROWS_MIN, decompositions.SPLIT_ROWS_MIN_COLUMN = limits
print("ok")
"""


def test_attention_layouts_joins_split_reductions_on_cuda():
    run_script(SCRIPT, "test_cuda_inductor_layouts")


def test_gemm_layout_ok():
    from ember._inductor.gemm import gemm_layout_ok
    B, H, T, D = 2, 3, 5, 4
    C = H * D
    assert gemm_layout_ok((B, H, T, D), (H * T * D, T * D, D, 1))          # contiguous
    assert gemm_layout_ok((B, H, D, T), (H * T * D, T * D, 1, D))          # k.transpose(-2, -1)
    assert not gemm_layout_ok((B, H, T, D), (3 * T * C, D, 3 * C, 1))      # a head of qkv
    assert gemm_layout_ok((1, H, T, D), (3 * T * C, D, 3 * C, 1))          # ... of one sequence
    assert gemm_layout_ok((B, H, T, D), (0, 0, D, 1))                      # broadcast batch
    assert not gemm_layout_ok((B, T, D), (T * D * 2, 2 * D, 2))            # no unit stride


def test_nll_loss_backward_lowered_on_cpu():
    """The same lowering in C++: no extern call in the backward, gradients equal PyTorch's."""
    import numpy as np
    import torch
    from inductor_helpers import Recorder

    import ember
    import ember._dynamo as dynamo
    backend = Recorder()
    graphs = backend.graphs
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 11)).astype(np.float32)
    t = np.array([1, 0, 10, -100, 3, 3, 5])
    for reduction in ("mean", "none"):
        dynamo.reset()
        graphs.clear()
        xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)

        def fn(m, a, b, r=reduction):
            return m.nn.functional.cross_entropy(a, b, reduction=r)
        out = ember.compile(lambda a, b, f=fn: f(ember, a, b), backend=backend)(
            xe, ember.tensor(t))
        ref = fn(torch, xt, torch.tensor(t))
        (out * out).sum().backward()
        (ref * ref).sum().backward()
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
        dynamo.reset()
        bw = graphs[-1].last
        assert bw.n_extern == 0, bw.code()


def test_tril_triu_lowered_on_cpu():
    """tril / triu as index selects (a causal mask folds into its reader): no extern call,
    values equal PyTorch's."""
    import numpy as np
    import torch
    from inductor_helpers import Recorder

    import ember
    import ember._dynamo as dynamo
    backend = Recorder()
    graphs = backend.graphs
    x = np.random.default_rng(0).standard_normal((3, 5, 7)).astype(np.float32)

    def causal(m, t):
        mask = m.tril(m.ones(5, 7)) == 0
        return m.triu(t, 2) + t.masked_fill(mask, float("-inf")).softmax(-1)
    dynamo.reset()
    out = ember.compile(lambda t: causal(ember, t), backend=backend)(ember.tensor(x))
    np.testing.assert_allclose(out.numpy(), causal(torch, torch.tensor(x)).numpy(), rtol=1e-6)
    dynamo.reset()
    assert graphs[-1].last.n_extern == 0 and graphs[-1].last.n_kernels == 1, \
        graphs[-1].last.code()
