"""The fake device's EMBER_CUDA_FAKE_PLANS switch, turned on in a process that already ran cuda
calls (in-process test runs: test_cuda_sort2 before test_native_cuda_host's factories): the
recordings an op spent while no plan could come of them (a fake launch is no plan with the switch
off) are forgotten, so its calls are planned once the switch is on. The fake device only (the
switch means nothing on a GPU)."""
import pytest
from cuda_script import run_script

from ember import _native

SCRIPT = r"""
import os
import ember
from ember import _native
from ember._ops import OPS
from ember.cuda.runtime import native_ops as N

was = os.environ.pop("EMBER_CUDA_FAKE_PLANS", None)
dev = ember.device("cuda:0")
try:
    for n in range(1, 80):   # each call pattern spends one of full's recordings, for no plan
        assert ember.full((n,), 1.5, device=dev).cpu().tolist() == [1.5] * n
    assert N._LEFT.get(OPS["full"], 1) <= 0, N._LEFT.get(OPS["full"])   # (spent)
    os.environ["EMBER_CUDA_FAKE_PLANS"] = "1"
    h0 = _native.device_stats()[0]
    for _ in range(4):
        assert ember.full((2, 5), 2.5, device=dev).cpu().tolist() == [[2.5] * 5] * 2
    assert _native.device_stats()[0] > h0, "full is never planned once the switch is on"
finally:
    if was is None:
        os.environ.pop("EMBER_CUDA_FAKE_PLANS", None)
    else:
        os.environ["EMBER_CUDA_FAKE_PLANS"] = was
print("ok")
"""


@pytest.mark.skipif(_native._C is None or not hasattr(_native._C, "devplan_register"),
                    reason="ember._C not built (python tools/build_native.py)")
def test_fake_plans_switch_forgets_spent_recordings():
    import ember
    from ember.cuda.runtime import driver as rt
    if ember.cuda.is_available() and not rt.FAKE:
        pytest.skip("a real GPU: the fake device's switch means nothing there")
    run_script(SCRIPT, "native_cuda_fake_plans")
