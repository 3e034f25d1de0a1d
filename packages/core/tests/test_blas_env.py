"""`_blas_env` (default; EMBER_BLAS_SPIN=1 off): OPENBLAS_THREAD_TIMEOUT is set around ember's first
numpy import (OpenBLAS's idle workers sleep at once) and not left in the environment; by
default, with numpy imported first or the user's own value it is left alone."""
import os
import subprocess
import sys

import pytest

_PROBE = ("import os, sys; {pre}import ember, ember._blas_env as e; "
          "print(e.applied, os.environ.get('OPENBLAS_THREAD_TIMEOUT'))")


def _probe(pre="", **env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("OPENBLAS_THREAD_TIMEOUT", "EMBER_BLAS_SPIN")}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", _PROBE.format(pre=pre)], env=full,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize("pre, env, want", [
    ("", {"EMBER_BLAS_SPIN": "0"}, ["True", "None"]),
    ("import numpy; ", {"EMBER_BLAS_SPIN": "0"}, ["False", "None"]),
    ("", {"EMBER_BLAS_SPIN": "0", "OPENBLAS_THREAD_TIMEOUT": "20"}, ["False", "20"]),
    ("", {}, ["True", "None"]),
    ("", {"EMBER_BLAS_SPIN": "1"}, ["False", "None"]),
])
def test_timeout_set_only_around_numpys_load(pre, env, want):
    assert _probe(pre, **env) == want
