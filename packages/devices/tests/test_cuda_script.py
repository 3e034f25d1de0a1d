"""The shared script runner isolates host-copy counts: a script run in-process (on a GPU, or on
the fake device of a process started with EMBER_CUDA_FAKE=1) sees only its own, so a script that
asserts none ran passes after another that took a host path on purpose (as on the H100, where
test_cuda_misc once counted test_cuda_linalg's failure paths in the same pytest worker)."""
import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import ember
from ember._device import get_backend
from cuda_script import run_script
assert ember.cuda.is_available()
be = get_backend("cuda")
be.fallback_ops["linalg_cholesky"] = 2            # an earlier script's failure paths
run_script("from ember._device import get_backend\n"
           "be = get_backend('cuda')\n"
           "assert not be.fallback_ops, be.fallback_ops\n"
           "be.fallback_ops['linalg_inv'] = 1\n", "isolated")
assert be.fallback_ops == {"linalg_cholesky": 2, "linalg_inv": 1}, be.fallback_ops
print("ok")
"""


def test_in_process_scripts_see_only_their_own_host_copies():
    pytest.importorskip("triton")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, EMBER_CUDA_FAKE="1", TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join([here] + [p for p in sys.path if p]))
    r = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
