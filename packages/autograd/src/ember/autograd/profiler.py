"""`ember.autograd.profiler`: the older profiler spelling (`torch.autograd.profiler.profile`,
`record_function`, `emit_nvtx`), recording through `ember.profiler`.

>>> import ember
>>> with ember.autograd.profiler.profile() as prof:
...     _ = ember.ones(2) * 2
>>> "aten::mul" in [e.key for e in prof.key_averages()]
True
"""
from __future__ import annotations

import contextlib

from ember.profiler import EventList, FunctionEvent, FunctionEventAvg, record_function
from ember.profiler import profile as _profile

__all__ = ["profile", "record_function", "emit_nvtx", "emit_itt", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


class profile:
    """`with profile() as prof:` records every op; `prof.key_averages().table()`,
    `prof.function_events`, `prof.export_chrome_trace(path)` afterwards."""

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device=None,
                 record_shapes: bool = False, with_flops: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_modules: bool = False, use_kineto: bool = False, use_cpu: bool = True,
                 experimental_config=None, acc_events: bool = False,
                 custom_trace_id_callback=None):
        self.enabled = enabled
        self._prof = _profile(record_shapes=record_shapes, profile_memory=profile_memory,
                              with_stack=with_stack, with_flops=with_flops,
                              with_modules=with_modules) if enabled else None
        self.function_events: EventList | None = None

    def __enter__(self):
        if self._prof is not None:
            self._prof.start()
        return self

    def __exit__(self, *exc):
        if self._prof is not None:
            self._prof.stop()
            self.function_events = self._prof.events()
        return False

    def _events(self) -> EventList:
        if self.function_events is None:
            raise RuntimeError("Profiler didn't finish running")
        return self.function_events

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        return self._events().key_averages(group_by_input_shape)

    def table(self, sort_by=None, row_limit: int = 100, **kwargs) -> str:
        return self._events().table(sort_by=sort_by, row_limit=row_limit, **kwargs)

    def export_chrome_trace(self, path: str) -> None:
        self._events().export_chrome_trace(path)

    @property
    def self_cpu_time_total(self) -> float:
        return self._events().self_cpu_time_total

    def __str__(self) -> str:
        return self.table()


@contextlib.contextmanager
def emit_nvtx(enabled: bool = True, record_shapes: bool = False):
    """NVTX ranges for nsys: ember emits none; the block runs unchanged."""
    yield


@contextlib.contextmanager
def emit_itt(enabled: bool = True, record_shapes: bool = False):
    """ITT ranges for VTune: ember emits none; the block runs unchanged."""
    yield
