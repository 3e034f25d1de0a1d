"""ember._C, core's pybind11 extension: built by Bazel, shipped in the wheel, optional at import."""

import importlib.util

import numpy as np
import pytest

_C = pytest.importorskip("ember._C", reason="ember._C not built (running from source)")


def test_abi_version_matches_stable_abi():
    import ember_abi

    assert _C.abi_version() == ember_abi.ABI_VERSION


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_fill_arange(dtype):
    a = np.zeros((3, 4), dtype=dtype)
    _C.fill_arange(a, 2, 3)
    np.testing.assert_array_equal(a, (2 + 3 * np.arange(12)).reshape(3, 4).astype(dtype))


def test_fill_arange_rejects_non_contiguous_and_readonly():
    a = np.zeros((4, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        _C.fill_arange(a[:, ::2])
    a.flags.writeable = False
    with pytest.raises((BufferError, ValueError)):
        _C.fill_arange(a)


def test_checksum_is_fnv1a():
    data = np.arange(10, dtype=np.int64)
    h = 1469598103934665603
    for byte in data.tobytes():
        h = ((h ^ byte) * 1099511628211) % 2**64
    assert _C.checksum(data) == h
    assert _C.checksum(b"") == 1469598103934665603


def test_extension_is_a_real_shared_object():
    spec = importlib.util.find_spec("ember._C")
    assert spec.origin.endswith(".so")
