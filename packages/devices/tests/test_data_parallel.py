"""nn.DataParallel on cuda: the batch split over device_ids, outputs gathered, gradients back on
the original parameters, all equal to running the module on the CPU. With one GPU (or the fake
device) device_ids=[0, 0] still splits, replicates and gathers; with two GPUs it uses both."""
from cuda_script import run_script

SCRIPT = r"""
import numpy as np, ember
rng = np.random.default_rng(0)
ids = [0, 1] if ember.cuda.device_count() >= 2 else [0, 0]
x = rng.normal(size=(6, 5)).astype("float32")

def make():
    ember.manual_seed(0)
    return ember.nn.Sequential(ember.nn.Linear(5, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))

ref = make()
y_ref = ref(ember.tensor(x))
(y_ref ** 2).sum().backward()

m = make()
dp = ember.nn.DataParallel(m, device_ids=ids)
assert dp.device_ids == ids and str(next(m.parameters()).device) == "cuda:0"
y = dp(ember.tensor(x))
assert str(y.device) == "cuda:0" and tuple(y.shape) == (6, 3), y
np.testing.assert_allclose(y.detach().cpu().numpy(), y_ref.detach().numpy(), rtol=1e-4, atol=1e-5)
(y ** 2).sum().backward()
for p, q in zip(m.parameters(), ref.parameters()):
    assert str(p.grad.device) == "cuda:0"
    np.testing.assert_allclose(p.grad.cpu().numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5)
z = ember.nn.parallel.data_parallel(m, ember.tensor(x).cuda(), device_ids=ids)
np.testing.assert_allclose(z.detach().cpu().numpy(), y_ref.detach().numpy(), rtol=1e-4,
                           atol=1e-5)
print("ok", ids)
"""


def test_data_parallel_on_cuda():
    run_script(SCRIPT, "test_data_parallel")
