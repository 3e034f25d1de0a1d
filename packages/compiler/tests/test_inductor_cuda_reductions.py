"""Triton reductions of ember's inductor: with EMBER_INDUCTOR_PERSISTENT=1 (opt-in) rows that fit a
block are persistent (each row loaded once into registers, every phase computed from there,
several rows a program), longer rows keep the looped form; both equal eager values and
gradients. On a GPU in-process (run_gpu.sh), else on the fake device (Triton's interpreter) in a
subprocess."""
from cuda_helpers import run_script

SCRIPT = r"""
import os, re
_persist = os.environ.get("EMBER_INDUCTOR_PERSISTENT")
os.environ["EMBER_INDUCTOR_PERSISTENT"] = "1"   # (opt-in: the persistent form is tested here)
import numpy as np, ember, ember._dynamo
from inductor_helpers import close, record_triton_kernels
F, nn = ember.nn.functional, ember.nn

srcs = record_triton_kernels()

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

