"""ember.utils.tensorboard.SummaryWriter: event files read back with tensorboard's own reader;
a clear ImportError naming the package when tensorboard is absent."""
import importlib
import importlib.util
import sys

import numpy as np
import pytest

import ember


def test_import_error_names_tensorboard_when_absent(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "tensorboard" else real(n, *a))
    for m in [m for m in sys.modules if m.startswith("ember.utils.tensorboard")]:
        monkeypatch.delitem(sys.modules, m)
    with pytest.raises(ImportError, match="needs the tensorboard package.*pip install "
                                          "tensorboard"):
        importlib.import_module("ember.utils.tensorboard")


def test_summary_writer_writes_readable_events(tmp_path):
    # the optional tensorboard package: pinned in requirements.lock for core's tests
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ember.utils.tensorboard import SummaryWriter
    vals = np.random.default_rng(0).normal(size=1000).astype("float32")
    with SummaryWriter(str(tmp_path)) as w:
        for i in range(4):
            w.add_scalar("loss", ember.tensor(1.0 / (i + 1)), i)
        w.add_histogram("weights", ember.tensor(vals), 3)
        w.add_text("note", "hello ember", 1)
        w.add_scalars("acc", {"train": 0.5, "val": 0.25}, 2)
    ea = EventAccumulator(str(tmp_path))
    ea.Reload()
    assert [(e.step, round(e.value, 6)) for e in ea.Scalars("loss")] == [
        (0, 1.0), (1, 0.5), (2, 0.333333), (3, 0.25)]
    h = ea.Histograms("weights")[0].histogram_value
    assert h.num == 1000 and h.min == pytest.approx(vals.min()) \
        and h.sum == pytest.approx(vals.astype(np.float64).sum(), rel=1e-5)
    assert sum(h.bucket) == 1000
    text = ea.Tensors("note/text_summary")[0].tensor_proto.string_val[0]
    assert text == b"hello ember"
    sub = EventAccumulator(str(tmp_path / "acc_val"))
    sub.Reload()
    assert sub.Scalars("acc")[0].value == 0.25


def _images(logdir, tag):
    import io

    from PIL import Image
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(str(logdir), size_guidance={"images": 0})
    ea.Reload()
    return [(e.step, e.width, e.height, np.asarray(Image.open(io.BytesIO(
        e.encoded_image_string)))) for e in ea.Images(tag)]


@pytest.mark.parametrize("shape,fmt,uint8", [((3, 6, 5), "CHW", False), ((6, 5, 1), "HWC", False),
                                             ((6, 5), "HW", True), ((10, 1, 4, 3), "NCHW", False),
                                             ((3, 4, 3, 3), "NHWC", True)])
def test_add_image_pixels_match_torch(tmp_path, shape, fmt, uint8):
    import torch
    from torch.utils.tensorboard import SummaryWriter as TorchWriter

    from ember.utils.tensorboard import SummaryWriter
    rng = np.random.default_rng(1)
    a = (rng.integers(0, 256, shape).astype(np.uint8) if uint8 else
         (rng.random(shape) * 1.2 - 0.1).astype(np.float32))  # out-of-range floats clip
    out = []
    for mod, writer, d in ((ember, SummaryWriter, tmp_path / "e"), (torch, TorchWriter,
                                                                    tmp_path / "t")):
        with writer(str(d)) as w:
            (w.add_images if len(fmt) == 4 else w.add_image)("im", mod.tensor(a), 3,
                                                             dataformats=fmt)
        out.append(_images(d, "im"))
    (se, we, he, pe), = out[0]
    (st, wt, ht, pt), = out[1]
    assert (se, we, he) == (st, wt, ht)
    np.testing.assert_array_equal(pe, pt)


def test_add_graph_nodes(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from ember.utils.tensorboard import SummaryWriter
    model = ember.nn.Sequential(ember.nn.Conv2d(1, 2, 3), ember.nn.ReLU(), ember.nn.Flatten(),
                                ember.nn.Linear(2 * 4 * 4, 3))
    if importlib.util.find_spec("ember.fx") is None:  # core's Bazel target: no compiler
        with SummaryWriter(str(tmp_path)) as w, pytest.raises(ImportError,
                                                              match="ember-compiler"):
            w.add_graph(model, ember.randn(2, 1, 6, 6))
        return
    with SummaryWriter(str(tmp_path)) as w:
        w.add_graph(model, ember.randn(2, 1, 6, 6))
    ea = EventAccumulator(str(tmp_path))
    ea.Reload()
    g = ea.Graph()
    ops = [n.op for n in g.node]
    assert ops.count("IO Node") == 1 and ops.count("Parameter") == 4
    assert [o for o in ops if o not in ("IO Node", "Parameter")] == ["conv2d", "relu",
                                                                      "flatten", "linear"]
    lin = next(n for n in g.node if n.op == "linear")
    assert list(lin.input)[0] == next(n.name for n in g.node if n.op == "flatten")
    dims = [d.size for d in lin.attr["_output_shapes"].list.shape[0].dim]
    assert dims == [2, 3]
