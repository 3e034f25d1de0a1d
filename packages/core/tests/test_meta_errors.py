"""Meta validates: every error case of the op database raises on the meta device the exception
type it raises on the CPU (design.md "Ops"; style.md 3a: the shape rule is the validator), so
fake tensors, export, the compiler and every device get PyTorch's errors without restating them.

The cases: the dtype cases of test_op_table.py (each record with its float arrays cast to int64
or its integer ones to float32) that raise on the CPU, and the error records of opdb_errors.py
(which must raise in torch too, with the same type).
"""
from __future__ import annotations

import pytest
from harness import torch
from opdb import Samples
from opdb_errors import ERRORS
from test_op_table import DATA_DEPENDENT, _cast_kind, _convert, _dtype_cases, _meta_call, _op

import ember

# Errors that depend on the tensors' values: the kernels raise them (a meta tensor has none).
VALUE_DEPENDENT = {
    **dict.fromkeys(["div_floor-f->int64", "floor_divide-f->int64", "remainder-f->int64",
                     "fmod-f->int64"],
                    "integer division by zero: the sample, cast to int64, holds zeros"),
}


def _cases():
    """(id, op, args as numpy, kw, float dtype) of the calls the CPU rejects."""
    for p in _dtype_cases():
        rec, kind, to = p.values
        args, _ = _cast_kind(rec, kind, to)
        yield p.id, rec, args, to
    for rec in ERRORS:
        yield rec.id, rec, list(rec.sample(Samples(0))), rec.dtype


def _call(rec, args, fdt, device=None):
    op = _op(rec)
    a = [_convert(x, ember, fdt, device) for x in args]
    kw = {k: _convert(v, ember, "float32", device) for k, v in rec.kw.items()}
    return _meta_call(rec, op, a, kw) if device == "meta" else op(*a, **kw)


def _raised(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the exception itself is the result
        return e
    return None


def _error_cases():
    out = []
    for cid, rec, args, fdt in _cases():
        if rec.name in DATA_DEPENDENT:  # no meta function: meta raises for every call
            continue
        e = _raised(lambda: _call(rec, args, fdt))  # noqa: B023
        if e is not None:
            out.append(pytest.param(rec, args, fdt, type(e), id=cid))
    return out


CASES = _error_cases()


def test_error_records_raise_on_cpu():
    """Every error record is an error on ember's CPU (else it tests nothing)."""
    ids = {p.id for p in CASES}
    assert not [r.id for r in ERRORS if r.id not in ids]


@pytest.mark.parametrize("rec", ERRORS, ids=str)
def test_error_records_match_torch(rec):
    """torch raises for each error record, the exception type ember's CPU kernel raises."""
    from test_op_table import _torch_fn
    args = rec.sample(Samples(0))
    targs = [_convert(a, torch, rec.dtype) for a in args]
    tkw = {k: _convert(v, torch, "float32") for k, v in rec.kw.items()}
    te = _raised(lambda: _torch_fn(rec)(*targs, **tkw))
    ee = _raised(lambda: _call(rec, args, rec.dtype))
    assert te is not None, f"{rec}: torch accepts this call"
    assert isinstance(ee, type(te)), f"{rec}: torch raised {te!r}, ember {ee!r}"


@pytest.mark.parametrize("rec,args,fdt,exc", CASES)
def test_meta_raises_the_cpu_error(request, rec, args, fdt, exc):
    cid = request.node.callspec.id
    e = _raised(lambda: _call(rec, args, fdt, "meta"))
    if cid in VALUE_DEPENDENT:
        assert e is None, f"{cid} now raises on meta ({e!r}): drop it from VALUE_DEPENDENT"
        return
    assert e is not None, f"{cid}: the CPU raises {exc.__name__}, meta accepts the call"
    assert isinstance(e, exc), f"{cid}: the CPU raises {exc.__name__}, meta {e!r}"
