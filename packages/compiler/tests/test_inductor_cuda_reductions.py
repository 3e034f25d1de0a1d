"""Triton reductions of ember's inductor: with EMBER_INDUCTOR_PERSISTENT=1 (opt-in) rows that fit a
block are persistent (each row loaded once into registers, every phase computed from there,
several rows a program), longer rows keep the looped form; both equal eager values and
gradients. Kernel dedup: the kernels of a 4-layer model are those of a 3-layer model (a kernel's
name never depends on its buffers' names). On a GPU in-process (run_gpu.sh), else on the fake
device (Triton's interpreter) in a subprocess."""
from cuda_helpers import run_script

SCRIPT = r"""
import os, re
_persist = os.environ.get("EMBER_INDUCTOR_PERSISTENT")
os.environ["EMBER_INDUCTOR_PERSISTENT"] = "1"   # (opt-in: the persistent form is tested here)
import numpy as np, ember, ember._dynamo
from ember._inductor import graph as G
F, nn = ember.nn.functional, ember.nn

srcs = {}
_orig = G._triton_kernels
def _record(sources):
    for s in sources:
        srcs[s.split("def ", 1)[1].split("(", 1)[0]] = s
    return _orig(sources)
G._triton_kernels = _record

def close(a, b, tol=1e-4):
    np.testing.assert_allclose(a.detach().cpu().numpy(), b.detach().cpu().numpy(), rtol=tol,
                               atol=tol)

def check(fn, *shapes, tol=1e-4, dtype="float32"):
    # compiled == eager, values and the inputs' gradients; the generated reduction kernels
    srcs.clear()
    ember._dynamo.reset()
    rng = np.random.default_rng(0)
    xs = [ember.tensor(rng.standard_normal(s).astype("float32")).cuda().to(
        getattr(ember, dtype)).requires_grad_() for s in shapes]
    r = ember.compile(fn)(*xs)
    g = ember.tensor(rng.standard_normal(tuple(r.shape)).astype("float32")).cuda().to(r.dtype)
    (r.float() * g.float()).sum().backward()
    grads = [x.grad.clone() for x in xs]
    for x in xs:
        x.grad = None
    e = fn(*xs)
    (e.float() * g.float()).sum().backward()
    close(r.float(), e.float(), tol)
    for a, x in zip(grads, xs):
        close(a.float(), x.grad.float(), tol)
    return [s for s in srcs.values() if "rnumel" in s and ("rindex" in s)]

def persistent(src):
    return "for roff" not in src and "tl.arange(0, RBLOCK)[None, :]" in src

def one_load_each(src):
    loads = re.findall(r"tl\.load\((p\d+) \+ \((.*?)\), mask", src)
    return len(loads) == len(set(loads))

mask = ember.tensor(np.triu(np.ones((24, 24), bool), 1)).cuda()

# softmax forward and backward over short rows: persistent, each input element loaded once
ks = check(lambda a: F.softmax((a * 0.5).masked_fill(mask, float("-inf")), -1), (3, 24, 24))
assert len(ks) == 2 and all(persistent(k) and one_load_each(k) for k in ks), ks
fwd = [k for k in ks if "tl.max(" in k][0]
assert fwd.count("tl.load(") == 2, fwd   # the scores and the mask, once each

# layer norm, log_softmax, var, mean, amax, any (bool), rows of 1 .. 300 wide
ks = check(lambda a, w: F.layer_norm(a, (300,), w, w), (37, 300), (300,))
assert ks and all(persistent(k) for k in ks if "tl.arange(0, XBLOCK)[None, :]" not in k)
check(lambda a: F.log_softmax(a, -1) * a.var(-1, keepdim=True), (5, 7, 33))
check(lambda a: a.mean(-1) + a.amax(-1) + (a > 1).any(-1).float(), (40, 3))
check(lambda a: a.sum(1) * a.amin(1), (9, 1000))
ks = check(lambda a: F.softmax(a, -1), (4, 64), dtype="bfloat16", tol=2e-2)
assert ks and all(persistent(k) for k in ks), ks

# rows longer than a block: split in pieces that fit (few rows), else the looped form; a
# log_softmax's max and sum in one loop (online softmax: the sum rescaled as the max grows)
check(lambda a: F.log_softmax(a, -1), (3, 5000))
import ember._inductor.decompositions as DC
DC.SPLIT_KEPT_MAX = 16   # (few rows here: looped as the GPT's 8192 rows of 50304)
ks = check(lambda a: F.log_softmax(a * 8, -1), (40, 5000))
assert ks and all("for roff" in k for k in ks), ks
fwd = [k for k in ks if "log_softmax" in k.split("fuses", 1)[1].split(chr(10))[0]]
assert len(fwd) == 1 and fwd[0].count("for roff") == 2 and "tl.exp(m0 - msafe0)" in fwd[0], fwd
tgt = ember.tensor(np.arange(40) * 117 % 5000).cuda()
check(lambda a: F.cross_entropy(a, tgt).reshape(1), (40, 5000))

# (in-process on a GPU: leave the switch as found)
if _persist is None:
    del os.environ["EMBER_INDUCTOR_PERSISTENT"]
else:
    os.environ["EMBER_INDUCTOR_PERSISTENT"] = _persist
print("ok")
"""


def test_inductor_cuda_persistent_and_online_reductions():
    run_script(SCRIPT, "test_cuda_inductor_reductions")


DEDUP = r"""
import math
import ember, ember._dynamo
from ember._inductor import graph as G
nn, F = ember.nn, ember.nn.functional
C, H, V, T = 16, 2, 32, 8
names = set()
_orig = G._triton_kernels
def _record(sources):
    names.update(s.split("def ", 1)[1].split("(", 1)[0] for s in sources)
    return _orig(sources)
G._triton_kernels = _record

class Block(nn.Module):   # the workloads' GPT block (benchmarks/workloads.py), tiny
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)   # (a generator expression would run
        k = k.view(B, T, H, C // H).transpose(1, 2)   # the whole forward eagerly: not
        v = v.view(B, T, H, C // H).transpose(1, 2)   # modelled by ember._dynamo)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = ember.tril(ember.ones(T, T, device=x.device)) == 0
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))

class GPT(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block() for _ in range(n)])
        self.ln, self.head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        x = self.tok(idx) + self.pos(ember.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

def kernels(n):
    names.clear()
    ember._dynamo.reset()
    ember.manual_seed(0)
    m = GPT(n).cuda()
    idx = ember.randint(0, V, (2, T), device="cuda")
    ember.compile(m)(idx, idx).backward()
    return set(names)

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
    run_script(DEDUP, "test_cuda_inductor_dedup")
