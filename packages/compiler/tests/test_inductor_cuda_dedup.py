"""Generated Triton kernels are named by their text with the buffer-derived accumulator names
(acc_buf13, red_buf13) numbered by order of appearance: the same block of every layer is one
kernel, compiled once (a 4-block model has the 2-block model's kernel set; a 2-layer GPT adds no
kernel to a 1-layer one's but its horizontal fusions over every layer). On a GPU in-process,
else on the fake device (Triton's interpreter) in a subprocess (cuda_helpers)."""
from cuda_helpers import run_script

from ember._inductor.graph import _ordinal_buffers

SCRIPT = r"""
import numpy as np, ember
import ember._dynamo
from ember._inductor import compile_graph

nn, F = ember.nn, ember.nn.functional
graphs = []
def backend(gm, ex):
    c = compile_graph(gm, ex)
    graphs.append(c)
    return c

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(48)
        self.fc = nn.Linear(48, 48)   # (an extern GEMM: each block's kernels stay apart)
    def forward(self, x):
        return self.fc(self.ln(F.softmax(x * 0.5, -1) + x))

def kernels(n):
    ember.manual_seed(0)
    m = nn.Sequential(*[Block() for _ in range(n)]).cuda()
    x = ember.randn(8, 48, device="cuda")
    graphs.clear()
    ember._dynamo.reset()
    with ember.no_grad():
        got = ember.compile(m, backend=backend)(x)
        np.testing.assert_allclose(got.cpu().numpy(), m(x).cpu().numpy(), rtol=1e-4, atol=1e-4)
    (g,) = graphs
    src = g.last.kernel_src
    names = {l.split("(")[0][4:] for l in src.splitlines() if l.startswith("def kernel_")}
    return g.last.n_kernels, names

n2, k2 = kernels(2)   # (the first block reads the input, the others a GEMM's output + bias)
n4, k4 = kernels(4)
assert n4 > n2 >= 2, (n2, n4)              # four blocks launch more kernels...
assert k4 == k2, (sorted(k2), sorted(k4))  # ...of the two blocks' kinds
print("ok")
"""


def test_equal_blocks_share_kernels():
    run_script(SCRIPT, "test_cuda_dedup")


GPT_LAYERS = r"""
import ember, ember._dynamo
from inductor_helpers import GPT, V, T, record_triton_kernels

srcs = record_triton_kernels()

def kernels(n):
    srcs.clear()
    ember._dynamo.reset()
    ember.manual_seed(0)
    m = GPT(n).cuda()
    idx = ember.randint(0, V, (2, T), device="cuda")
    ember.compile(m)(idx, idx).backward()
    return set(srcs)

# a second layer adds no kernel: its kernels are the first's (before: one more kernel per
# layer for each of ~12 kernels). Two kernels differ: the horizontal fusions over every layer
# (a layer norm's rstd, the residual adds), whose operand lists grow with the layer count
one, two = kernels(1), kernels(2)
assert len(one) > 20 and len(two) == len(one) and len(two - one) <= 2, (sorted(one),
                                                                        sorted(two))
print("ok")
"""


def test_inductor_cuda_kernels_of_identical_layers_compile_once():
    # a kernel's name is the hash of its text, which never holds buffer names: the second
    # layer's kernels are the first's (before: one more kernel per layer and reduction)
    run_script(GPT_LAYERS, "test_cuda_inductor_dedup")


def test_ordinal_buffers_renames_accumulators_only():
    src = ("# kernel: buffers buf13, buf14\n"
           "    acc_buf13 = tl.full([RBLOCK], 0, tl.float32)\n"
           "    acc_buf14 = acc_buf13 + t0\n"
           "    red_buf13 = tl.sum(acc_buf13, 0)\n"
           "    tl.store(p0 + x0, red_buf13)\n")
    out = _ordinal_buffers(src)
    assert out.splitlines()[0] == "# kernel: buffers buf13, buf14"   # comments kept
    assert "acc_b0 = tl.full" in out and "acc_b1 = acc_b0 + t0" in out
    assert "red_b0 = tl.sum(acc_b0, 0)" in out and "buf1" not in out.split("\n", 1)[1]
    other = src.replace("buf13", "buf40").replace("buf14", "buf41")
    assert _ordinal_buffers(other).split("\n", 1)[1] == out.split("\n", 1)[1]
