"""One way to run a test script against ember's cuda device, shared by the family test files.

In this process where it has a cuda device (a real GPU, or the fake device when this process was
started with EMBER_CUDA_FAKE=1); otherwise on the fake device in a subprocess, because
EMBER_CUDA_FAKE=1 and TRITON_INTERPRET=1 must be set before triton is imported. The script
asserts what it checks: finishing is passing. In-process, each script sees only its own host
copies (`fallback_ops` starts empty), as in a fresh subprocess: scripts that assert none ran must
not count the failure paths an earlier script in the same worker took on purpose.
"""
from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

import ember


def run_script(script: str, name: str, timeout: int = 900) -> None:
    if ember.cuda.is_available():
        from ember._device import get_backend
        be = get_backend("cuda")
        earlier, be.fallback_ops = be.fallback_ops, {}
        # a module of its own in sys.modules: code that imports the script's functions back by
        # their __module__ (torch's dynamo tracing a reference's score_mod) finds them
        mod = types.ModuleType(name)
        sys.modules[name] = mod
        try:
            exec(compile(script, name, "exec"), mod.__dict__)
        finally:
            sys.modules.pop(name, None)
            for op, n in be.fallback_ops.items():
                earlier[op] = earlier.get(op, 0) + n
            be.fallback_ops = earlier
        return
    pytest.importorskip("triton")
    env = dict(os.environ, EMBER_CUDA_FAKE="1", TRITON_INTERPRET="1",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{name}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"


def run_plan_script(script: str, name: str, monkeypatch, timeout: int = 600) -> None:
    """A script about native launch plans: on a real GPU in a fresh process (plans are capped
    per op and per call pattern for a process's life: earlier tests in a pytest worker would
    leave it fewer hits), else run_script with EMBER_CUDA_FAKE_PLANS=1 (the fake device keeps
    plans too). In-process, the native path and its graph nodes are on again after it."""
    from ember import _native
    from ember.cuda.runtime import driver as rt
    monkeypatch.setenv("EMBER_CUDA_FAKE_PLANS", "1")
    if ember.cuda.is_available() and not rt.FAKE:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=timeout)
        assert r.returncode == 0, f"{name}:\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
        return
    try:
        run_script(script, name, timeout=timeout)
    finally:  # (a failure must not leave them off)
        _native.set_enabled(True)
        _native.set_native_grad(True)
