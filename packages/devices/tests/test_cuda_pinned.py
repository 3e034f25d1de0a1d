"""Page-locked host memory: Tensor.pin_memory / is_pinned and asynchronous copies from it, on the
fake device (a subprocess: the environment must be set before triton is imported) and on a GPU."""
import os
import subprocess
import sys

import pytest

import ember

pytest.importorskip("triton")

SCRIPT = r"""
import gc
import numpy as np, ember
from ember._device import get_backend
be = get_backend("cuda")
x = ember.arange(12, dtype=ember.float32).reshape(3, 4)
assert not x.is_pinned()
p = x.pin_memory()
assert p.is_pinned() and p.device.type == "cpu" and p.dtype == x.dtype
assert p.pin_memory() is p                       # already pinned: itself
assert np.array_equal(p.numpy(), x.numpy())
assert p[1:].is_pinned() and not p.clone().is_pinned()   # views share it, copies do not
g = p.to("cuda", non_blocking=True)
ember.cuda.synchronize()
assert np.array_equal(g.cpu().numpy(), x.numpy())
h = p.cuda()                                     # blocking: p may be written right after
p.fill_(7)
assert np.array_equal(h.cpu().numpy(), x.numpy())
try:
    g.pin_memory()
except RuntimeError as e:
    assert "only dense CPU tensors" in str(e)
else:
    raise AssertionError("pinning a cuda tensor must raise")
n = len(be._pinned)
del p, h
gc.collect()
be._reap_pinned()
assert len(be._pinned) < n, (n, be._pinned)     # the block is freed with its last view
print("ok")
"""


@pytest.mark.skipif(ember.cuda.is_available(), reason="the GPU run below covers it")
def test_pinned_on_the_fake_device():
    env = dict(os.environ, EMBER_CUDA_FAKE="1", TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


@pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA GPU present")
def test_pinned_on_the_gpu():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


def test_pinning_without_an_accelerator_is_a_clear_error():
    if ember.cuda.is_available():
        pytest.skip("an accelerator is present")
    with pytest.raises(RuntimeError, match="pin_memory: cannot access accelerator"):
        ember.ones(3).pin_memory()
    assert not ember.ones(3).is_pinned()
