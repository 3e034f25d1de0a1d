"""Scripts that need a cuda device: run in this process on a GPU, else on ember's fake device
(EMBER_CUDA_FAKE=1, Triton's interpreter: TRITON_INTERPRET=1) in a subprocess, because both
must be set before triton is imported. A script asserts what it checks: finishing is passing."""
import os
import subprocess
import sys

import pytest


def has_gpu() -> bool:
    try:
        import ember.cuda
    except ImportError:
        return False
    return ember.cuda.is_available()


def run_script(script: str, name: str, timeout: int = 600) -> None:
    if has_gpu():  # from a file: Triton's @jit reads its kernels' source through inspect
        import runpy
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, f"{name}.py")
            with open(path, "w") as f:
                f.write(script)
            runpy.run_path(path, init_globals={"ON_GPU": True}, run_name=name)
        return
    pytest.importorskip("triton")
    env = dict(os.environ, EMBER_CUDA_FAKE="1", TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", "ON_GPU = False\n" + script], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{name}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
