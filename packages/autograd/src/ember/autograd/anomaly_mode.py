"""Anomaly detection: record each node's forward traceback and, optionally, fail on NaN grads."""
from __future__ import annotations

import functools
import warnings

from ember._state import state

from ._graph import ANOMALY

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]


def is_anomaly_enabled() -> bool:
    return bool(state.__dict__.get("anomaly"))


def is_anomaly_check_nan_enabled() -> bool:
    a = state.__dict__.get("anomaly")
    return bool(a and a[1])


def _store(value) -> None:
    """Set this thread's anomaly state, keeping the count of threads that have it on."""
    ANOMALY[0] += bool(value) - bool(state.__dict__.get("anomaly"))
    state.anomaly = value


def _set(mode: bool, check_nan: bool):
    prev = state.__dict__.get("anomaly")
    _store((True, bool(check_nan)) if mode else None)
    return prev


class detect_anomaly:
    """Context manager / decorator: while active, a failing backward names the forward op (its
    traceback is printed as a warning) and, with check_nan, NaN gradients raise."""

    def __init__(self, check_nan: bool = True):
        self.check_nan = check_nan
        self.prev = None
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self.prev = _set(True, self.check_nan)

    def __exit__(self, *exc):
        _store(self.prev)

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly detection on or off (a function call or a context manager)."""

    def __init__(self, mode: bool, check_nan: bool = True):
        self.prev = _set(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *exc):
        _store(self.prev)
