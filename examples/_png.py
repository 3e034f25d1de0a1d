"""A loss curve as a PNG with numpy and zlib only (no plotting library needed)."""
from __future__ import annotations

import struct
import zlib

import numpy as np

# 3x5 digit glyphs for axis labels
_GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111",
    "3": "111001111001111", "4": "101101111001001", "5": "111100111001111",
    "6": "111100111101111", "7": "111001001001001", "8": "111101111101111",
    "9": "111101111001111", ".": "000000000000010",
}


def _text(img, x: int, y: int, s: str, scale: int = 2) -> None:
    for ch in s:
        g = _GLYPHS.get(ch)
        if g:
            for i, bit in enumerate(g):
                if bit == "1":
                    r, c = divmod(i, 3)
                    img[y + r * scale:y + (r + 1) * scale, x + c * scale:x + (c + 1) * scale] = 0
        x += 4 * scale


def _line(img, x0, y0, x1, y1, color) -> None:
    n = int(max(abs(x1 - x0), abs(y1 - y0))) + 1
    xs = np.linspace(x0, x1, n).round().astype(int)
    ys = np.linspace(y0, y1, n).round().astype(int)
    for dx in (0, 1):
        img[np.clip(ys, 0, img.shape[0] - 1), np.clip(xs + dx, 0, img.shape[1] - 1)] = color


def write_png(path: str, rgb: np.ndarray) -> None:
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[r].astype(np.uint8).tobytes() for r in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(
            ">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plot_losses(losses, path: str, w: int = 640, h: int = 400) -> None:
    """Raw losses in light blue, a running mean in dark blue, y labels at min and max."""
    img = np.full((h, w, 3), 255, np.uint8)
    left, right, top, bottom = 60, w - 20, 20, h - 40
    img[top:bottom + 1, left] = 0
    img[bottom, left:right + 1] = 0
    ys = np.asarray(losses, dtype=np.float64)
    if len(ys) >= 2:
        lo, hi = float(ys.min()), float(ys.max())
        hi = hi if hi > lo else lo + 1

        def px(i, v):
            return (left + (right - left) * i / (len(ys) - 1),
                    bottom - (bottom - top) * (v - lo) / (hi - lo))
        k = max(1, len(ys) // 25)
        smooth = np.convolve(ys, np.ones(k) / k, mode="valid")
        for series, color, off in ((ys, (160, 190, 240), 0), (smooth, (20, 60, 200), k - 1)):
            for i in range(len(series) - 1):
                _line(img, *px(i + off, series[i]), *px(i + 1 + off, series[i + 1]), color)
        _text(img, 4, top, f"{hi:.2f}")
        _text(img, 4, bottom - 10, f"{lo:.2f}")
        _text(img, right - 40, bottom + 10, str(len(ys)))
    write_png(path, img)
