"""Helpers shared by the tests of ember._C's native paths (test_native_*.py)."""
from ember import _native


def both_paths(fn) -> list:
    """fn() with the native path off, then on: its results (or its error: type and message)."""
    res = []
    for on in (False, True):
        _native.set_enabled(on)
        try:
            res.append(fn())
        except Exception as e:  # noqa: BLE001 - the error itself is what is compared
            res.append(("E", type(e).__name__, str(e)))
        finally:
            _native.set_enabled(True)
    return res
