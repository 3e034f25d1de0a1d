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
    # needs the optional tensorboard package (not pinned in requirements.lock)
    pytest.importorskip("tensorboard")
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
