"""Images that are not digits, for the uncertainty check: blank, solid, noise and letters drawn
with Pillow's own font. An answer's entropy and mutual information should be higher on these than
on real digits. Letters are the held-out kind: outlier exposure (training/digits/outliers.py)
trains on noise, blank, solid, strokes and blobs, never on letters."""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

LETTERS = "AEHKMNRWXZ"
HELD_OUT_KINDS = ("letters",)
"""Kinds of non_digits() that no training batch ever contains."""


def letter(char: str, side: int = 32) -> np.ndarray:
    """A bright letter on a dark square, shrunk by area to 8x8 like any large upload."""
    canvas = Image.new("L", (side, side), 0)
    font = ImageFont.load_default(size=side - 4)
    ImageDraw.Draw(canvas).text((side / 2, side / 2), char, fill=255, font=font, anchor="mm")
    small = canvas.resize((8, 8), Image.Resampling.BOX)
    return np.asarray(small, dtype=np.float32) / 255.0


def non_digits(seed: int = 0, noise: int = 20) -> dict[str, np.ndarray]:
    """Kind → (N, 8, 8) grey images in [0, 1]."""
    rng = np.random.default_rng(seed)
    return {
        "blank": np.zeros((1, 8, 8), np.float32),
        "solid": np.ones((1, 8, 8), np.float32),
        "noise": rng.uniform(0, 1, (noise, 8, 8)).astype(np.float32),
        "letters": np.stack([letter(c) for c in LETTERS]),
    }
