"""Random ops in compiled CUDA graphs (ember._inductor.rng): rand / randn / dropout become
Philox draws inside the fused Triton kernels, seeded from a (seed, counter) tensor the wrapper
fills per call and mode="reduce-overhead" refills per replay. Values differ from step to step,
follow eager's distributions, repeat from manual_seed, and gradients use the forward's mask.
On a GPU in-process, else on the fake device (Triton's interpreter) in a subprocess."""
from cuda_helpers import run_script

SCRIPT = r"""
import numpy as np, ember
import ember._dynamo.cudagraphs as cg
from inductor_helpers import Recorder

F = ember.nn.functional
backend = Recorder()
graphs = backend.graphs

# rand_like / randn_like / bernoulli: eager's distributions, fresh per call, repeatable
x = ember.zeros(64, 64, device="cuda")
fn = lambda x: (ember.rand_like(x), ember.randn_like(x) + x, ember.bernoulli(x + 0.25))
f = ember.compile(fn, backend=backend)
ember.manual_seed(0)
u, n, b = [t.cpu().numpy() for t in f(x)]
assert graphs[0].last is not None and "tl.randint(" in graphs[0].last.kernel_src
assert graphs[0].last.n_extern == 0, graphs[0].last.wrapper_src   # no eager random kernel
assert u.dtype == np.float32 and 0.0 <= u.min() and u.max() < 1.0
assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 1 / 12) < 0.01, (u.mean(), u.var())
assert abs(n.mean()) < 0.05 and abs(n.std() - 1) < 0.05, (n.mean(), n.std())
assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.25) < 0.03, b.mean()
assert len(np.unique(u)) > 4000            # elements draw distinct counters
u2 = f(x)[0].cpu().numpy()
assert not np.array_equal(u, u2)           # the generator advanced
ember.manual_seed(0)
np.testing.assert_array_equal(f(x)[0].cpu().numpy(), u)   # and manual_seed repeats it

# dropout under mode="reduce-overhead": one recording, replays draw new masks
cg.counters.update(recorded=0, replayed=0)
cg.skips.clear()
cg._state["pending_backward"] = 0
w = ember.nn.Parameter(ember.ones(32, 32, device="cuda"))
def step(x):
    return F.dropout(x * w, 0.5, True)
graphs.clear()
cs = ember.compile(step, mode="reduce-overhead", backend=backend)
masks = []
for i in range(4):
    x = ember.randn(32, 32, device="cuda") + 3.0       # never 0: a zero output is dropped
    y = cs(x)
    y.sum().backward()
    yn, xn, g = y.detach().cpu().numpy(), x.cpu().numpy(), w.grad.cpu().numpy()
    keep = yn != 0
    np.testing.assert_allclose(yn[keep], 2 * xn[keep], rtol=1e-5)   # survivors scaled 1/(1-p)
    np.testing.assert_allclose(g, np.where(keep, 2 * xn, 0), rtol=1e-5)  # the same mask
    assert abs(keep.mean() - 0.5) < 0.06, keep.mean()
    masks.append(keep)
    w.grad = None
for a, b in zip(masks, masks[1:]):
    assert (a != b).mean() > 0.3           # every replay draws new numbers
fw = graphs[0].last                        # the mask drawn, applied and saved in one kernel
assert fw.n_kernels == 1 and fw.n_extern == 0, fw.code()
assert cg.skips == [], cg.skips
assert cg.counters["recorded"] == 2 and cg.counters["replayed"] >= 4, cg.counters

# random ops the compiler leaves to eager (randperm) are named before capturing; an eager
# draw inside a capture (here a plain callable) is caught by the generator's offset
cg.skips.clear()
ce = ember.compile(lambda x: x[ember.randperm(8, device=x.device)] * 2,
                   mode="reduce-overhead", backend=backend)
x = ember.arange(8.0, device="cuda")
for _ in range(3):
    assert sorted(ce(x).cpu().numpy().tolist()) == [2.0 * i for i in range(8)]
assert any(s.startswith("random ops (randperm") for s in cg.skips), cg.skips
r = cg.Runner(lambda t: ember.rand_like(t) + t, frozenset(), "inference")
outs = [r(x).cpu().numpy() for _ in range(3)]
assert r.disabled is not None and r.disabled.startswith("random ops (drawn by an eager"), \
    r.disabled
assert not np.array_equal(outs[1], outs[2])
print("ok")
"""


def test_random_ops_in_compiled_cuda_graphs():
    run_script(SCRIPT, "test_cuda_inductor_random")
