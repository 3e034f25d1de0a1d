"""What the profiler records: one event per op call (through a dispatch mode) and per
record_function range; their per-name averages, the text table and the Chrome trace."""
from __future__ import annotations

import json
import os
import threading
import time

from .._dispatch import DispatchMode, call, call_below_modes
from .._state import state
from .._tensor import Tensor

__all__ = ["FunctionEvent", "FunctionEventAvg", "EventList", "Recorder"]


class FunctionEvent:
    """One op call or record_function range: name, start/end (us since the profile began),
    thread, input shapes; cpu_children are the events nested directly inside it."""

    def __init__(self, name, start_us, thread, input_shapes=None, is_user_annotation=False):
        self.name, self.key = name, name
        self.time_range_start, self.time_range_end = start_us, start_us
        self.thread = thread
        self.input_shapes = input_shapes or []
        self.is_user_annotation = is_user_annotation
        self.cpu_children: list = []
        self.cpu_parent = None
        self.count = 1
        self.device_type = "CPU"
        self.device_time = 0.0   # us on the GPU between CUDA events around the op (its kernels)
        self._cuda = None        # (start, end) ember.cuda.Event pair until read

    @property
    def cpu_time_total(self) -> float:
        return self.time_range_end - self.time_range_start

    @property
    def device_time_total(self) -> float:
        return self.device_time

    @property
    def self_device_time_total(self) -> float:
        return self.device_time - sum(c.device_time for c in self.cpu_children)

    cuda_time_total = device_time_total            # PyTorch's older names
    self_cuda_time_total = self_device_time_total

    @property
    def self_cpu_time_total(self) -> float:
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    cpu_time = cpu_time_total

    def __repr__(self):
        return (f"<FunctionEvent name={self.name} cpu_time_total={self.cpu_time_total:.3f}us "
                f"input_shapes={self.input_shapes}>")


class FunctionEventAvg:
    """Totals over the events of one key (name, and input shapes when grouped by them)."""

    def __init__(self, key, input_shapes=None):
        self.key = key
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.device_time_total = 0.0
        self.self_device_time_total = 0.0

    def add(self, ev) -> FunctionEventAvg:
        self.count += 1
        self.cpu_time_total += ev.cpu_time_total
        self.self_cpu_time_total += ev.self_cpu_time_total
        self.device_time_total += ev.device_time_total
        self.self_device_time_total += ev.self_device_time_total
        return self

    cuda_time_total = property(lambda self: self.device_time_total)
    self_cuda_time_total = property(lambda self: self.self_device_time_total)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


_SORT_KEYS = {"cpu_time_total": "cpu_time_total", "self_cpu_time_total": "self_cpu_time_total",
              "cpu_time": "cpu_time", "count": "count",
              "cuda_time_total": "device_time_total", "device_time_total": "device_time_total",
              "self_cuda_time_total": "self_device_time_total",
              "self_device_time_total": "self_device_time_total"}


class EventList(list):
    """A list of FunctionEvent (or FunctionEventAvg) with torch's summaries."""

    def __init__(self, events=(), trace_start_ns=0, use_device: bool = False):
        super().__init__(events)
        self._trace_start_ns = trace_start_ns
        self._use_device = use_device  # CUDA was profiled: the table shows device columns

    @property
    def self_device_time_total(self) -> float:
        return sum(e.self_device_time_total for e in self)

    @property
    def self_cpu_time_total(self) -> float:
        return sum(e.self_cpu_time_total for e in self)

    def key_averages(self, group_by_input_shape: bool = False, group_by_stack_n: int = 0,
                     group_by_overload_name: bool = False) -> EventList:
        """One FunctionEventAvg per name (and input shapes), in first-seen order."""
        avgs: dict = {}
        for ev in self:
            shapes = str(ev.input_shapes) if group_by_input_shape else None
            key = "ProfilerStep*" if ev.key.startswith("ProfilerStep#") else ev.key
            k = (key, shapes)
            if k not in avgs:
                avgs[k] = FunctionEventAvg(key, ev.input_shapes if shapes else None)
            avgs[k].add(ev)
        return EventList(avgs.values(), self._trace_start_ns, self._use_device)

    def table(self, sort_by: str | None = None, row_limit: int = 100, max_name_column_width=55,
              header: str | None = None, top_level_events_only: bool = False, **_) -> str:
        """The text table torch prints: self and total CPU time per row, then the total."""
        rows = list(self)
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise AttributeError(f"'FunctionEventAvg' object has no attribute '{sort_by}'")
            rows.sort(key=lambda e: getattr(e, _SORT_KEYS[sort_by]), reverse=True)
        if row_limit is not None and row_limit > 0:
            rows = rows[:row_limit]
        shapes = any(getattr(e, "input_shapes", None) for e in rows) and \
            isinstance(rows[0], FunctionEventAvg) and rows[0].input_shapes is not None \
            if rows else False
        total = self.self_cpu_time_total or 1e-9
        dev_total = self.self_device_time_total
        name_w = max([4] + [min(len(e.key), max_name_column_width) for e in rows]) + 2
        dev_cols = ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
        cols = ["Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"] + (
            dev_cols if self._use_device else []) + ["# of Calls"] + (
            ["Input Shapes"] if shapes else [])
        line = "-" * name_w + "  " + "  ".join("-" * 12 for _ in cols)
        out = [header] if header else []
        out += [line, "Name".rjust(name_w) + "  " + "  ".join(c.rjust(12) for c in cols), line]
        for e in rows:
            n = max(e.count, 1)
            cells = [f"{100 * e.self_cpu_time_total / total:.2f}%", _fmt_us(e.self_cpu_time_total),
                     f"{100 * e.cpu_time_total / total:.2f}%", _fmt_us(e.cpu_time_total),
                     _fmt_us(e.cpu_time_total / n)]
            if self._use_device:
                sd = e.self_device_time_total
                cells += [_fmt_us(sd), f"{100 * sd / (dev_total or 1e-9):.2f}%",
                          _fmt_us(e.device_time_total), _fmt_us(e.device_time_total / n)]
            cells.append(str(e.count))
            if shapes:
                cells.append(str(e.input_shapes))
            out.append(e.key[:max_name_column_width].rjust(name_w) + "  "
                       + "  ".join(c.rjust(12) for c in cells))
        out += [line, f"Self CPU time total: {_fmt_us(self.self_cpu_time_total)}"]
        if self._use_device:
            out.append(f"Self CUDA time total: {_fmt_us(dev_total)}")
        out.append("")
        return "\n".join(out)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events as Chrome trace JSON ("X" complete events, microseconds), readable by
        Perfetto and chrome://tracing."""
        pid = os.getpid()
        base_us = self._trace_start_ns / 1e3
        events = []
        for i, ev in enumerate(self):
            events.append({"ph": "X", "cat": "user_annotation" if ev.is_user_annotation
                           else "cpu_op", "name": ev.name, "pid": pid, "tid": ev.thread,
                           "ts": base_us + ev.time_range_start, "dur": ev.cpu_time_total,
                           "args": {"Input Dims": ev.input_shapes, "Ev Idx": i}})
            if ev.device_time:  # the op's GPU time (between its CUDA events), on a GPU row
                events.append({"ph": "X", "cat": "kernel", "name": ev.name, "pid": "GPU 0",
                               "tid": "stream", "ts": base_us + ev.time_range_start,
                               "dur": ev.device_time, "args": {"External id": i}})
        trace = {"schemaVersion": 1, "displayTimeUnit": "ms",
                 "baseTimeNanoseconds": self._trace_start_ns, "traceEvents": events,
                 "traceName": path}
        with open(path, "w") as f:
            json.dump(trace, f)


def _op_name(op) -> str:
    q = op.qualname
    return q if "::" in q else "aten::" + q.split(".")[0]


class Recorder(DispatchMode):
    """The dispatch mode that times each op; record_function ranges nest through `stack`."""

    def __init__(self, record_shapes: bool = False, cuda: bool = False):
        self.record_shapes = record_shapes
        self.cuda = cuda  # time ops on CUDA tensors with CUDA events (ProfilerActivity.CUDA)
        self.events: list = []
        self.stack: list = []
        self.start_ns = time.perf_counter_ns()
        self.wall_start_ns = time.time_ns()

    def now_us(self) -> float:
        return (time.perf_counter_ns() - self.start_ns) / 1e3

    def open(self, name, shapes=None, user=False) -> FunctionEvent:
        ev = FunctionEvent(name, self.now_us(), threading.get_ident(), shapes, user)
        if self.stack:
            ev.cpu_parent = self.stack[-1]
            self.stack[-1].cpu_children.append(ev)
        self.stack.append(ev)
        self.events.append(ev)
        return ev

    def close(self, ev) -> None:
        ev.time_range_end = self.now_us()
        if self.stack and self.stack[-1] is ev:
            self.stack.pop()
        elif ev in self.stack:
            self.stack.remove(ev)

    def __ember_dispatch__(self, op, args, out):
        shapes = None
        if self.record_shapes:
            shapes = [list(a.shape) if isinstance(a, Tensor) else [] for a in args]
        ev = self.open(_op_name(op), shapes)
        timed = self.cuda and _on_cuda(args)
        if timed:
            import ember.cuda
            ev._cuda = (ember.cuda.Event(enable_timing=True),
                        ember.cuda.Event(enable_timing=True))
            ev._cuda[0].record()
        try:
            modes = state.modes
            if modes:  # another mode below this one: it sees the op next
                return call(op, args, out)
            # the op runs with this recorder still active, so the ops it calls (its
            # decomposition, autograd's recording) nest under its row, as torch's aten::linear
            # holds aten::t and aten::matmul
            modes.append(self)
            try:
                return call_below_modes(op, args, out)
            finally:
                modes.pop()
        finally:
            if timed:
                ev._cuda[1].record()
            self.close(ev)

    def event_list(self) -> EventList:
        for ev in self.events:  # the device times, once the GPU has run to the end events
            if ev._cuda is not None:
                start, end = ev._cuda
                end.synchronize()
                ev.device_time = start.elapsed_time(end) * 1e3  # ms -> us
                ev._cuda = None
        return EventList(sorted(self.events, key=lambda e: e.time_range_start),
                         self.wall_start_ns, self.cuda)


def _on_cuda(args) -> bool:
    for a in args:
        if isinstance(a, Tensor) and a.device.type == "cuda":
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(x, Tensor) and x.device.type ==
                                                "cuda" for x in a):
            return True
    return False


_active: list = []        # the recording profilers (record_function writes into each)
_lock = threading.Lock()


def active_recorders() -> list:
    return _active


def push(rec: Recorder) -> None:
    with _lock:
        _active.append(rec)


def pop(rec: Recorder) -> None:
    with _lock:
        if rec in _active:
            _active.remove(rec)
