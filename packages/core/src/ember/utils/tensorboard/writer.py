"""SummaryWriter (torch.utils.tensorboard.SummaryWriter's API): scalars, histograms, images,
text, hparams and the model graph as TensorBoard event files, written by tensorboard's
EventFileWriter."""
from __future__ import annotations

import os
import socket
import time

import numpy as np

try:  # an optional dependency (the extra `tensorboard`): only this module needs it
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import HistogramProto, Summary, SummaryMetadata
    from tensorboard.compat.proto.tensor_pb2 import TensorProto
    from tensorboard.compat.proto.tensor_shape_pb2 import TensorShapeProto
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
except ImportError as e:
    raise ImportError("ember.utils.tensorboard needs the tensorboard package, which is not "
                      "installed: pip install tensorboard") from e

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


def _png(img: np.ndarray) -> bytes:
    """A PNG of an (H, W, C) uint8 image, C = 1 (gray), 3 (RGB) or 4 (RGBA); no filtering."""
    import struct
    import zlib
    h, w, c = img.shape
    color = {1: 0, 3: 2, 4: 6}[c]
    raw = b"".join(b"\x00" + img[y].tobytes() for y in range(h))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color, 0,
                                                               0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


def _grid(nchw: np.ndarray, ncols: int = 8) -> np.ndarray:
    """N images (N, 1 or 3, H, W) tiled in rows of up to ncols: (3, H * rows, W * cols)."""
    if nchw.shape[1] == 1:
        nchw = np.concatenate([nchw] * 3, 1)
    n, _, h, w = nchw.shape
    ncols = min(n, ncols)
    nrows = -(-n // ncols)
    canvas = np.zeros((3, h * nrows, w * ncols), dtype=nchw.dtype)
    for i in range(n):
        y, x = divmod(i, ncols)
        canvas[:, y * h:(y + 1) * h, x * w:(x + 1) * w] = nchw[i]
    return canvas


def _to_hwc(a: np.ndarray, fmt: str) -> np.ndarray:
    fmt = fmt.upper()
    if len(set(fmt)) != len(fmt) or a.ndim != len(fmt):
        raise ValueError(f"add_image: dataformats {fmt!r} does not fit an image of shape "
                         f"{a.shape}")
    if len(fmt) == 4:
        return _grid(a.transpose([fmt.find(c) for c in "NCHW"])).transpose(1, 2, 0)
    if len(fmt) == 3:
        a = a.transpose([fmt.find(c) for c in "HWC"])
        return np.concatenate([a] * 3, 2) if a.shape[2] == 1 else a
    return np.stack([a.transpose([fmt.find(c) for c in "HW"])] * 3, 2)


def _image(img, dataformats: str) -> Summary.Image:
    a = _to_hwc(_np(img), dataformats)
    scale = 1 if a.dtype == np.uint8 else 255  # float images are taken to be in [0, 1]
    a = (a.astype(np.float32) * scale).clip(0, 255).astype(np.uint8)
    h, w, c = a.shape
    return Summary.Image(height=h, width=w, colorspace=c,
                         encoded_image_string=_png(np.ascontiguousarray(a)))


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

    def add_image(self, tag: str, img_tensor, global_step=None, walltime=None,
                  dataformats: str = "CHW") -> None:
        """One image (CHW, HWC or HW; float in [0, 1] or uint8), PNG-encoded as PyTorch's."""
        self._summary(Summary(value=[Summary.Value(tag=tag, image=_image(img_tensor,
                                                                         dataformats))]),
                      global_step, walltime)

    def add_images(self, tag: str, img_tensor, global_step=None, walltime=None,
                   dataformats: str = "NCHW") -> None:
        """A batch of images as one grid (up to 8 per row), as PyTorch's writer."""
        self.add_image(tag, img_tensor, global_step, walltime, dataformats)

    def add_graph(self, model, input_to_model=None, verbose: bool = False,
                  use_strict_trace: bool = True) -> None:
        """The model's op graph (traced with make_fx, from ember-compiler) as a GraphDef
        TensorBoard's graph plugin shows: one node per op, its inputs, shapes and dtype."""
        from ._graph import graph_def
        args = input_to_model if isinstance(input_to_model, (tuple, list)) else (
            input_to_model,)
        self._event(Event(graph_def=graph_def(model, args).SerializeToString()))

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
