"""The C++ kernel build for the running CPU: the ISA is part of the cache key, and a compiler that
rejects the native flags falls back to the portable build."""
import os

import pytest

from ember._ops import _cpujit

SRC = 'extern "C" int ember_seven() { return 7; }\n'

pytestmark = pytest.mark.skipif(not _cpujit.available(), reason="no C++ compiler here")


def _fresh(monkeypatch, tmp_path):
    d = tmp_path / "kc"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("EMBER_CPU_KERNEL_CACHE", str(d))
    return d


def test_native_build_runs_and_key_has_isa(monkeypatch, tmp_path):
    d = _fresh(monkeypatch, tmp_path)
    monkeypatch.setattr(_cpujit, "_native", True)
    lib = _cpujit._build([SRC])
    assert lib is not None and lib.ember_seven() == 7
    first = set(os.listdir(d))
    monkeypatch.setattr(_cpujit, "_isa_sig", "another CPU")  # another ISA: another library
    assert _cpujit._build([SRC]).ember_seven() == 7
    assert len({f for f in os.listdir(d) if f.endswith(".so")}) == \
        len({f for f in first if f.endswith(".so")}) + 1


def test_rejected_native_flags_fall_back(monkeypatch, tmp_path):
    _fresh(monkeypatch, tmp_path)
    monkeypatch.setattr(_cpujit, "_native", True)
    monkeypatch.setattr(_cpujit, "NATIVE_FLAGS", ("-march=no-such-cpu",))
    lib = _cpujit._build([SRC])
    assert lib is not None and lib.ember_seven() == 7
    assert _cpujit._native is False  # later builds go straight to the portable flags
    assert not _cpujit._broken
