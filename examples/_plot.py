"""The demo's loss plot and progress bar: matplotlib and tqdm (tools/demo.sh installs both from
the lock's demo section), with plain fallbacks where they are absent (_png.py, a text bar)."""
from __future__ import annotations

import math
import sys


def progress(total: int, initial: int = 0):
    """A progress bar: tqdm's, or a text one. `.update(n, loss=..., tok_s=...)`, `.close()`."""
    try:
        from tqdm import tqdm
    except ImportError:
        return _TextBar(total, initial)
    return _Tqdm(tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True,
                      mininterval=0.5, file=sys.stdout))


def _fmt(v: float) -> str:
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.0f}"


class _Tqdm:
    def __init__(self, bar):
        self.bar = bar

    def update(self, n: int, **stats) -> None:
        self.bar.update(n)
        if stats:  # set_postfix redraws: tqdm's mininterval keeps it to twice a second
            self.bar.set_postfix({k: _fmt(v) for k, v in stats.items()}, refresh=False)

    def close(self) -> None:
        self.bar.close()


class _TextBar:
    def __init__(self, total: int, initial: int, width: int = 30):
        self.total, self.n, self.width, self.last = total, initial, width, None

    def update(self, n: int, **stats) -> None:
        import time
        self.n += n
        now = time.perf_counter()
        if self.last is not None and now - self.last < 0.5 and self.n < self.total:
            return
        self.last = now
        done = int(self.width * self.n / self.total)
        tail = " ".join(f"{k} {_fmt(v)}" for k, v in stats.items())
        print(f"\r[{'#' * done}{'.' * (self.width - done)}] step {self.n:4d}/{self.total} {tail}",
              end="", flush=True)

    def close(self) -> None:
        print()


def plot_losses(train: list, val: list, path: str, baseline: float | None = None) -> str:
    """Train loss per step (and its running mean) and val loss at (step, loss) points, to a PNG.
    Returns what drew it ("matplotlib" or "plain")."""
    try:
        import matplotlib
        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        from _png import plot_losses as plain
        plain(train, path)
        return "plain"
    steps = range(1, len(train) + 1)
    k = max(1, len(train) // 50)
    smooth = [sum(train[max(0, i - k + 1):i + 1]) / len(train[max(0, i - k + 1):i + 1])
              for i in range(len(train))]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    if k > 1:
        ax.plot(steps, train, color="tab:blue", alpha=0.25, linewidth=0.8,
                label="train (per step)")
        ax.plot(steps, smooth, color="tab:blue", linewidth=1.8, label=f"train (mean of {k} steps)")
    else:
        ax.plot(steps, train, color="tab:blue", linewidth=1.5, label="train")
    if val:
        vs, vl = zip(*val)
        ax.plot(vs, vl, "o-", color="tab:orange", linewidth=1.8, markersize=4, label="validation")
    if baseline is not None and math.isfinite(baseline):
        ax.axhline(baseline, color="gray", linestyle="--", linewidth=1,
                   label=f"uniform guess ({baseline:.2f})")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss (nats/char)")
    ax.set_title("char-level GPT on Python's stdlib sources")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return "matplotlib"
