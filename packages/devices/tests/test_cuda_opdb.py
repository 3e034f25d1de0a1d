"""Every record of core's op database on cuda against the same op on the CPU: values, shapes,
dtypes, mutated arguments, errors, and the gradients of every differentiable input.

Runs on the lent GPU (run_gpu.sh tests) and, through Triton's interpreter on the fake device
(EMBER_CUDA_FAKE=1 TRITON_INTERPRET=1, test_cuda_interp.py starts it), without one. Ops that run
their CPU kernel on host copies instead of a GPU kernel must be listed in the backend's HOST with
the reason, and the test fails once they stop doing so: the list is the backend's debt, kept
honest.
"""
from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import pytest

import ember

pytestmark = pytest.mark.skipif(not ember.cuda.is_available(), reason="no CUDA GPU present")

if ember.cuda.is_available():  # core's op database lives in its tests
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "core", "tests"))
    from opdb import RECORDS  # noqa: E402
    from test_op_table import TABLE, _diff_leaves, _get, _inputs, _pick, _place  # noqa: E402
else:
    RECORDS = []

FAKE = os.environ.get("EMBER_CUDA_FAKE") == "1"

# ops that run on host copies, and why: the backend's HOST (each family module lists its own)
HOST_OPS = importlib.import_module("ember._device").get_backend("cuda").HOST if RECORDS else {}


def _backend():
    from ember._device import get_backend
    return get_backend("cuda")


def _to_cuda_args(rec, op, args, kw):
    if not op.tensor_idx and not op.list_idx and op.device_idx is not None:
        kw = {**kw, "device": "cuda"}  # factories
    return args, kw


def _host(x):
    if isinstance(x, ember.Tensor):
        x = x.detach()
        return x.cpu()
    if isinstance(x, (tuple, list)):
        return type(x)(_host(e) for e in x) if not hasattr(x, "_fields") else \
            tuple(_host(e) for e in x)
    return x


def _tol(rec, dtype):
    r, a = {"float32": (2e-5, 2e-5), "float64": (1e-9, 1e-9)}.get(dtype, (1e-2, 1e-2))
    return max(r, rec.rtol or 0), max(a, rec.atol or 0)


def _close(e, g, rec, path="out", values=True):
    """e: the CPU result, g: the cuda one (both on the host now)."""
    if isinstance(e, (tuple, list)):
        assert isinstance(g, (tuple, list)) and len(e) == len(g), f"{path}: {type(g)}"
        for i, (a, b) in enumerate(zip(e, g)):
            _close(a, b, rec, f"{path}[{i}]", values)
        return
    if isinstance(e, ember.Tensor):
        assert isinstance(g, ember.Tensor), f"{path}: expected a Tensor, got {type(g)}"
        assert tuple(e.shape) == tuple(g.shape), f"{path}: shape {tuple(g.shape)} != {e.shape}"
        assert e.dtype == g.dtype, f"{path}: dtype {g.dtype} != {e.dtype}"
        if not values:
            return
        a, b = e.numpy(), g.numpy()
        if a.dtype.kind in "fc":
            r, t = _tol(rec, str(e.dtype).split(".")[-1])
            np.testing.assert_allclose(b, a, rtol=r, atol=t, equal_nan=True, err_msg=path)
        else:
            assert np.array_equal(a, b), f"{path}: {b} != {a}"
        return
    if isinstance(e, float):
        np.testing.assert_allclose(g, e, rtol=1e-5, err_msg=path)
        return
    assert e == g, f"{path}: {g!r} != {e!r}"


def _on_cuda(r, path="out"):
    if isinstance(r, ember.Tensor):
        assert r.device.type == "cuda", f"{path} is on {r.device}, not cuda"
    elif isinstance(r, (tuple, list)):
        for i, x in enumerate(r):
            _on_cuda(x, f"{path}[{i}]")


def _float_outs(r):
    rs = r if isinstance(r, (tuple, list)) else (r,)
    return [x for x in rs if isinstance(x, ember.Tensor) and x.dtype.is_floating_point]


@pytest.mark.parametrize("rec", RECORDS, ids=str)
def test_op_on_cuda(rec):
    op = TABLE[rec.name]
    be = _backend()
    before = dict(be.fallback_ops)
    cargs, ckw = _inputs(rec, ember)
    gargs, gkw = _to_cuda_args(rec, op, *_inputs(rec, ember, device="cuda"))
    try:
        e = op(*cargs, **ckw)
    except Exception as exc:  # the CPU raises: cuda raises the same type
        with pytest.raises(type(exc)):
            op(*gargs, **gkw)
        return
    g = op(*gargs, **gkw)
    _on_cuda(g)
    if rec.outs is not None:  # sign-ambiguous outputs (eigenvectors): as core's test
        _close(_pick(e, rec.outs), _pick(_host(g), rec.outs), rec, values=rec.values)
    _close(e, _host(g), rec, values=rec.values and rec.outs is None)
    for i in op.mutated_idx:  # mutated inputs (copy_, running stats) match too
        if i < len(cargs) and isinstance(cargs[i], ember.Tensor):
            _close(cargs[i], _host(gargs[i]), rec, f"arg{i}", rec.values)
    if rec.grad and rec.values and (op.vjp or op.decomp or op.view):
        _check_grads(rec, op)
    _check_host_ops(rec, be, before)


def _check_grads(rec, op):
    """The gradients of sum(out * w) over every differentiable input, cuda vs CPU."""
    grads = []
    for dev in ("cpu", "cuda"):
        args, kw = _inputs(rec, ember, device=None if dev == "cpu" else "cuda")
        leaves = [(i, j) for i, j in _diff_leaves(op, args) if rec.wrt is None or i in rec.wrt]
        if not leaves:
            return
        xs = [_get(args, i, j).detach().clone().requires_grad_() for i, j in leaves]
        ins = [(x + x.transpose(-2, -1)) / 2 if rec.sym and k == 0 else x.clone()
               for k, x in enumerate(xs)]
        r = op(*_place(args, leaves, ins), **kw)
        outs = _float_outs(r)
        if rec.gout is not None:
            outs = outs[:rec.gout]
        if rec.outs is not None:  # only the well-defined outputs enter the loss
            outs = [outs[i] for i in rec.outs if i < len(outs)]
        outs = [o for o in outs if o.requires_grad]
        if not outs:
            return
        rng = np.random.default_rng(7)
        ws = [ember.tensor(rng.standard_normal(tuple(o.shape)).astype(str(o.dtype)[6:]))
              .to(o.device) for o in outs]
        loss = sum((o * w).sum() for o, w in zip(outs, ws))
        gs = ember.autograd.grad(loss, xs, allow_unused=True)
        grads.append([None if x is None else _host(x) for x in gs])
    for k, (a, b) in enumerate(zip(*grads)):
        assert (a is None) == (b is None), f"grad[{k}]: {a} vs {b}"
        if a is not None:
            _close(a, b, rec, f"grad[{k}]")


def _check_host_ops(rec, be, before):
    host = {q for q, n in be.fallback_ops.items() if n != before.get(q, 0)}
    unlisted = sorted(q for q in host if q not in HOST_OPS)
    assert not unlisted, (f"{rec.name}: {unlisted} ran on host copies: write the GPU kernel, or "
                          f"list them in HOST_OPS with the reason")
    return host


def test_host_ops_still_need_the_host():
    """Every op listed in HOST_OPS still runs on host copies for some record (else: unlist it)."""
    be, seen = _backend(), set()
    for rec in RECORDS:
        before = dict(be.fallback_ops)
        try:
            test_op_on_cuda(rec)
        except Exception:  # test_op_on_cuda reports it
            pass
        seen |= {q for q, n in be.fallback_ops.items() if n != before.get(q, 0)}
    stale = sorted(q for q in HOST_OPS if q not in seen)
    assert not stale, f"these run on the GPU now: drop them from their module's HOST: {stale}"
