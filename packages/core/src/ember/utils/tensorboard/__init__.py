"""`ember.utils.tensorboard`: SummaryWriter writing TensorBoard event files through the
`tensorboard` package's own event writer (install it: pip install tensorboard).

>>> import ember
>>> from ember.utils.tensorboard import SummaryWriter   # doctest: +SKIP
>>> with SummaryWriter("runs/demo") as w:               # doctest: +SKIP
...     w.add_scalar("loss", 0.5, 1)
"""
from __future__ import annotations

import importlib.util

if importlib.util.find_spec("tensorboard") is None:
    raise ImportError("ember.utils.tensorboard needs the tensorboard package, which is not "
                      "installed: pip install tensorboard")

from .writer import SummaryWriter  # noqa: E402

__all__ = ["SummaryWriter"]
