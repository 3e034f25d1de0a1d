"""ember.compile with a factory on `device="cuda"` (no index): capture's fake tensors report
`cuda:0` as the eager tensor does, so adding it to a `cuda:0` input is no device mismatch.
Runs on a GPU in this process, else on the fake device in a subprocess (cuda_helpers)."""
from cuda_helpers import run_script

SCRIPT = r"""
import ember
x = ember.ones(3, device="cuda")

@ember.compile(backend="aot_eager", fullgraph=True)
def f(x):
    return x + ember.rand(3, device="cuda") + ember.zeros(3, device=ember.device("cuda"))

y = f(x)
assert y.device == ember.device("cuda:0"), y.device
assert ((y >= 1) & (y < 2)).all().item(), y

from ember._subclasses.fake_tensor import FakeTensorMode
with FakeTensorMode(), ember.device("cuda"):  # the device context's default, unindexed too
    assert ember.ones(3).device == ember.device("cuda:0")
"""


def test_unindexed_cuda_factory_under_compile():
    run_script(SCRIPT, "compile_device_index")
