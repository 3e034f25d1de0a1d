"""SummaryWriter (torch.utils.tensorboard.SummaryWriter's API): scalars, histograms, text,
hparams and raw summaries as TensorBoard event files, written by tensorboard's EventFileWriter."""
from __future__ import annotations

import os
import socket
import time

import numpy as np
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
from tensorboard.compat.proto.tensor_pb2 import TensorProto
from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
from tensorboard.summary.writer.event_file_writer import EventFileWriter

__all__ = ["SummaryWriter"]


def _np(x) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach()
    if hasattr(x, "cpu"):
        x = x.cpu()
    if hasattr(x, "numpy"):
        return np.asarray(x.numpy())
    return np.asarray(x)


def _scalar(x) -> float:
    return float(_np(x).reshape(-1)[0]) if not isinstance(x, (int, float)) else float(x)


def _histogram(values, bins="tensorflow", max_bins=None) -> HistogramProto:
    v = _np(values).astype(np.float64).reshape(-1)
    if bins == "tensorflow":
        # TensorFlow's default exponential buckets (as torch's writer uses)
        pos = [1e-12]
        while pos[-1] < 1e20:
            pos.append(pos[-1] * 1.1)
        edges = [-x for x in reversed(pos)] + [0.0] + pos
        counts, limits = np.histogram(v, bins=np.array(edges))
    else:
        counts, limits = np.histogram(v, bins=bins)
    nz = np.nonzero(counts)[0]
    if len(nz):       # trim empty buckets at both ends, keeping one for the edges
        start, end = max(nz[0] - 1, 0), min(nz[-1] + 2, len(counts))
        counts, limits = counts[start:end], limits[start:end + 1]
    return HistogramProto(min=float(v.min()), max=float(v.max()), num=int(v.size),
                          sum=float(v.sum()), sum_squares=float((v * v).sum()),
                          bucket_limit=[float(x) for x in limits[1:]],
                          bucket=[float(c) for c in counts])


def _text_summary(tag: str, text: str) -> Summary:
    meta = SummaryMetadata(plugin_data=SummaryMetadata.PluginData(plugin_name="text"))
    tensor = TensorProto(dtype="DT_STRING", string_val=[text.encode("utf-8")],
                         tensor_shape=TensorShapeProto(dim=[TensorShapeProto.Dim(size=1)]))
    return Summary(value=[Summary.Value(tag=tag + "/text_summary", metadata=meta,
                                        tensor=tensor)])


class SummaryWriter:
    """Writes event files under log_dir (default runs/<date>_<host><comment>)."""

    def __init__(self, log_dir=None, comment: str = "", purge_step=None, max_queue: int = 10,
                 flush_secs: int = 120, filename_suffix: str = ""):
        if not log_dir:
            stamp = time.strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        self.purge_step = purge_step
        self.max_queue, self.flush_secs = max_queue, flush_secs
        self.filename_suffix = filename_suffix
        self.file_writer = EventFileWriter(self.log_dir, max_queue, flush_secs, filename_suffix)
        self.all_writers = {self.log_dir: self.file_writer}
        if purge_step is not None:
            self._event(Event(step=purge_step, file_version="brain.Event:2"))
            self._event(Event(step=purge_step, session_log=_session_start()))

    def get_logdir(self) -> str:
        return self.log_dir

    def _event(self, event, writer=None) -> None:
        if not event.wall_time:
            event.wall_time = time.time()
        (writer or self.file_writer).add_event(event)

    def _summary(self, summary, global_step=None, walltime=None, writer=None) -> None:
        ev = Event(summary=summary, wall_time=walltime or time.time())
        if global_step is not None:
            ev.step = int(global_step)
        self._event(ev, writer)

    def add_scalar(self, tag: str, scalar_value, global_step=None, walltime=None,
                   new_style: bool = False, double_precision: bool = False) -> None:
        value = _scalar(scalar_value)
        self._summary(Summary(value=[Summary.Value(tag=tag, simple_value=value)]),
                      global_step, walltime)

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step=None,
                    walltime=None) -> None:
        """One sub-run per key (log_dir/main_tag_key), as torch's writer."""
        for key, value in tag_scalar_dict.items():
            path = os.path.join(self.log_dir, f"{main_tag.replace('/', '_')}_{key}")
            w = self.all_writers.get(path)
            if w is None:
                w = self.all_writers[path] = EventFileWriter(path, self.max_queue,
                                                             self.flush_secs,
                                                             self.filename_suffix)
            self._summary(Summary(value=[Summary.Value(tag=main_tag,
                                                       simple_value=_scalar(value))]),
                          global_step, walltime, w)

    def add_histogram(self, tag: str, values, global_step=None, bins="tensorflow",
                      walltime=None, max_bins=None) -> None:
        self._summary(Summary(value=[Summary.Value(tag=tag, histo=_histogram(values, bins))]),
                      global_step, walltime)

    def add_text(self, tag: str, text_string: str, global_step=None, walltime=None) -> None:
        self._summary(_text_summary(tag, text_string), global_step, walltime)

    def add_hparams(self, hparam_dict: dict, metric_dict: dict, hparam_domain_discrete=None,
                    run_name=None, global_step=None) -> None:
        """Hyperparameters as text plus their metrics as scalars in a sub-run."""
        run = os.path.join(self.log_dir, run_name or str(time.time()))
        w = self.all_writers.setdefault(run, EventFileWriter(run, self.max_queue,
                                                             self.flush_secs))
        lines = "\n".join(f"| {k} | {v} |" for k, v in hparam_dict.items())
        self._summary(_text_summary("hparams", "| name | value |\n|---|---|\n" + lines),
                      global_step, None, w)
        for k, v in metric_dict.items():
            self._summary(Summary(value=[Summary.Value(tag=k, simple_value=_scalar(v))]),
                          global_step, None, w)

    def add_image(self, tag, img_tensor, global_step=None, walltime=None, dataformats="CHW"):
        raise NotImplementedError("SummaryWriter.add_image is not implemented in ember (it "
                                  "needs PNG encoding); log scalars, histograms or text")

    def add_graph(self, model, input_to_model=None, verbose=False, use_strict_trace=True):
        raise NotImplementedError("SummaryWriter.add_graph is not implemented in ember")

    def flush(self) -> None:
        for w in self.all_writers.values():
            w.flush()

    def close(self) -> None:
        for w in self.all_writers.values():
            w.flush()
            w.close()
        self.all_writers = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _session_start():
    from tensorboard.compat.proto.event_pb2 import SessionLog
    return SessionLog(status=SessionLog.START)
