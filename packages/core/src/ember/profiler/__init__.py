"""`ember.profiler`: time every op call and record_function range, as `torch.profiler`.

>>> import ember
>>> from ember.profiler import profile, record_function
>>> with profile() as prof:
...     with record_function("block"):
...         y = (ember.ones(3, 3) + 1).sum()
>>> [e.key for e in prof.key_averages()][:2]
['block', 'aten::ones']
>>> "Self CPU time total" in prof.key_averages().table(sort_by="cpu_time_total")
True

Ops are seen through a dispatch mode on the profiling thread; with ProfilerActivity.CUDA, an op
on CUDA tensors is also timed on the device between two CUDA events (its kernels' time).
"""
from __future__ import annotations

import functools
import os
import socket
import time
from enum import Enum

from . import _events
from ._events import EventList, FunctionEvent, FunctionEventAvg

__all__ = ["profile", "record_function", "schedule", "ProfilerActivity", "ProfilerAction",
           "tensorboard_trace_handler", "supported_activities", "EventList", "FunctionEvent",
           "FunctionEventAvg"]


class ProfilerActivity(Enum):
    CPU = 0
    CUDA = 2
    XPU = 3
    MTIA = 4
    PrivateUse1 = 5


def supported_activities() -> set:
    acts = {ProfilerActivity.CPU}
    import ember
    if ember.cuda.is_available():
        acts.add(ProfilerActivity.CUDA)
    return acts


class ProfilerAction(Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0, skip_first: int = 0,
             skip_first_wait: int = 0):
    """step number -> ProfilerAction: skip_first steps, then cycles of wait, warmup and active
    steps (the last active step saves), `repeat` times (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise AssertionError("Invalid profiler schedule arguments")
    if warmup == 0:
        import warnings
        warnings.warn("Profiler won't be using warmup, this can skew profiler results",
                      stacklevel=2)

    def fn(step: int) -> ProfilerAction:
        if step < 0:
            raise AssertionError(f"Step must be non-negative, got {step}")
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        if skip_first_wait and step < wait:
            return ProfilerAction.NONE
        if skip_first_wait:
            step -= wait
        num_steps = wait + warmup + active
        if repeat > 0 and step / num_steps >= repeat:
            return ProfilerAction.NONE
        mod = step % num_steps
        if mod < wait:
            return ProfilerAction.NONE
        if mod < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if mod < num_steps - 1 else ProfilerAction.RECORD_AND_SAVE
    return fn


def _always_record(_step: int) -> ProfilerAction:
    return ProfilerAction.RECORD


class record_function:
    """A named range in the profile (a context manager or decorator); free when not profiling."""

    def __init__(self, name: str, args: str | None = None):
        self.name = name
        self.args = args
        self._open: list = []

    def __enter__(self):
        self._open = [(rec, rec.open(self.name, user=True))
                      for rec in list(_events.active_recorders())]
        return self

    def __exit__(self, *exc):
        for rec, ev in self._open:
            rec.close(ev)
        self._open = []
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            with record_function(self.name, self.args):
                return fn(*a, **k)
        return wrapper


class profile:
    """Profile the ops run inside `with profile(...) as prof:`; `prof.step()` advances the
    schedule, `on_trace_ready(prof)` runs after each saved cycle.

    activities, profile_memory, with_stack, with_flops and with_modules are accepted for
    compatibility; ember records CPU-side op timings (and shapes with record_shapes=True).
    """

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None,
                 record_shapes: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_flops: bool = False, with_modules: bool = False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False,
                 use_cuda=None, custom_trace_id_callback=None):
        self.activities = set(activities) if activities else supported_activities()
        self.schedule = schedule or _always_record
        self.on_trace_ready = on_trace_ready
        self.record_shapes = record_shapes
        self.profile_memory, self.with_stack = profile_memory, with_stack
        self.with_flops, self.with_modules = with_flops, with_modules
        self.step_num = 0
        self.current_action = ProfilerAction.NONE
        self._rec = None
        self._step_ev = None
        self._last: EventList | None = None

    # ---- recording ----------------------------------------------------------------------------
    def _start_recording(self) -> None:
        if self._rec is None:
            self._rec = _events.Recorder(self.record_shapes,
                                         ProfilerActivity.CUDA in self.activities)
            self._rec.__enter__()
            _events.push(self._rec)

    def _stop_recording(self) -> None:
        rec, self._rec = self._rec, None
        if rec is None:
            return
        self._close_step_event(rec)
        _events.pop(rec)
        rec.__exit__(None, None, None)
        self._last = rec.event_list()

    def _close_step_event(self, rec) -> None:
        if self._step_ev is not None:
            rec.close(self._step_ev)
            self._step_ev = None

    def _enter_action(self, action: ProfilerAction) -> None:
        prev, self.current_action = self.current_action, action
        recording = (ProfilerAction.WARMUP, ProfilerAction.RECORD,
                     ProfilerAction.RECORD_AND_SAVE)
        if prev == ProfilerAction.RECORD_AND_SAVE or (prev in recording
                                                       and action == ProfilerAction.NONE):
            self._stop_recording()
            if prev == ProfilerAction.RECORD_AND_SAVE and self.on_trace_ready:
                self.on_trace_ready(self)
        if action == ProfilerAction.WARMUP:
            self._start_recording()
        elif action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            if prev == ProfilerAction.WARMUP and self._rec is not None:
                # warmup events are dropped: restart the clock where the active steps begin
                _events.pop(self._rec)
                self._rec.__exit__(None, None, None)
                self._rec, self._step_ev = None, None
            self._start_recording()
        if self._rec is not None and self.schedule is not _always_record:
            self._close_step_event(self._rec)
            self._step_ev = self._rec.open(f"ProfilerStep#{self.step_num}", user=True)

    def start(self) -> None:
        self._enter_action(self.schedule(self.step_num))

    def stop(self) -> None:
        was = self.current_action
        self._stop_recording()
        self.current_action = ProfilerAction.NONE
        if was in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE) \
                and self.on_trace_ready:
            self.on_trace_ready(self)

    def step(self) -> None:
        """Mark the end of a training step (advances the schedule)."""
        self.step_num += 1
        self._enter_action(self.schedule(self.step_num))

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    # ---- results ------------------------------------------------------------------------------
    def events(self) -> EventList:
        if self._last is None:
            raise AssertionError("Profiler must be stopped or have a finished cycle before "
                                 "reading its events")
        return self._last

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str) -> None:
        self.events().export_chrome_trace(path)

    def export_stacks(self, path: str, metric: str = "self_cpu_time_total") -> None:
        raise NotImplementedError("ember.profiler records no Python stacks (with_stack): "
                                  "export_stacks is not available")

    @property
    def self_cpu_time_total(self) -> float:
        return self.events().self_cpu_time_total


def tensorboard_trace_handler(dir_name: str, worker_name: str | None = None,
                              use_gzip: bool = False):
    """on_trace_ready handler writing `<worker>.<time>.pt.trace.json` files into dir_name."""
    def handler(prof) -> None:
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        name = f"{worker}.{time.time_ns() // 1_000_000}.pt.trace.json"
        path = os.path.join(dir_name, name)
        prof.export_chrome_trace(path)
        if use_gzip:
            import gzip
            import shutil
            with open(path, "rb") as src, gzip.open(path + ".gz", "wb") as dst:
                shutil.copyfileobj(src, dst)
            os.remove(path)
    return handler
