"""Synthetic non-digit images for outlier exposure (Hendrycks et al., "Deep Anomaly Detection with
Outlier Exposure", 2019): training batches carry some of these with a uniform target, so the
network learns to answer "cannot tell" (high entropy, disagreeing dropout heads) off the digit
manifold instead of confidently naming a digit.

Kinds used in training (TRAIN_KINDS): Gaussian noise, blank, solid, random strokes, blobs, and
typeset capitals (TRAIN_LETTERS, in matplotlib's fonts, as glyphs.py sets its digits): block shapes
that fill their box, which the strokes reading crops to fill the frame like a digit. The letters of
the evaluation (training/digits/probes.py: LETTERS, in Pillow's own font) are never used here: they
stay the held-out kind, and TRAIN_LETTERS shares none of them, in either case.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from training.digits.glyphs import font_faces, typeset_char

TRAIN_KINDS = ("gaussian_noise", "blank", "solid", "strokes", "blobs", "letters_typeset")
TRAIN_LETTERS = "CDFJLPTUVY"
"""Capitals with no digit's shape (not O, I, S, B, G, Q, Z) and none of the held-out LETTERS."""


def _strokes(rng: np.random.Generator, side: int = 32) -> np.ndarray:
    """2..6 random straight strokes drawn at side x side (an upload: the served reading frames
    it)."""
    canvas = Image.new("L", (side, side), 0)
    draw = ImageDraw.Draw(canvas)
    for _ in range(int(rng.integers(2, 7))):
        x0, y0, x1, y1 = rng.uniform(0, side, 4)
        draw.line((x0, y0, x1, y1), fill=255, width=int(rng.integers(2, 6)))
    return np.asarray(canvas, np.float32) / 255.0


def _blobs(rng: np.random.Generator, side: int = 8) -> np.ndarray:
    """1..3 Gaussian blobs of random centre, size and brightness."""
    yy, xx = np.mgrid[0:side, 0:side].astype(np.float32) * (8 / side)
    img = np.zeros((side, side), np.float32)
    for _ in range(int(rng.integers(1, 4))):
        cy, cx = rng.uniform(-1, 8, 2)
        s = rng.uniform(0.8, 3.0)
        img += rng.uniform(0.4, 1.0) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
    return np.clip(img, 0, 1)


def synthetic_non_digits(n: int, seed: int = 0) -> list[np.ndarray]:
    """n grey images in [0, 1], the TRAIN_KINDS in turn: half at the dataset's 8x8, half as
    uploads of 16..96 pixels a side, which the served reading (handlers/kits/image/reading.py) frames
    like any large image (framed noise is a grey field, not the noise an 8x8 image shows)."""
    rng = np.random.default_rng(seed)
    fonts = font_faces() if n >= len(TRAIN_KINDS) else []
    out = []
    for i in range(n):
        kind = TRAIN_KINDS[i % len(TRAIN_KINDS)]
        side = 8 if (i // len(TRAIN_KINDS)) % 2 == 0 else int(rng.integers(16, 97))
        if kind == "gaussian_noise":
            img = rng.normal(rng.uniform(0.1, 0.6), rng.uniform(0.1, 0.5), (side, side))
        elif kind == "blank":
            img = np.full((side, side), rng.uniform(0.0, 0.05))
        elif kind == "solid":
            img = np.full((side, side), rng.uniform(0.2, 1.0))
        elif kind == "strokes":
            img = _strokes(rng, max(side, 32)) if side > 8 else _strokes_8(rng)
        elif kind == "blobs":
            img = _blobs(rng, side)
        else:
            img = _letter(rng, fonts, side)
        out.append(np.clip(img, 0, 1).astype(np.float32))
    return out


def _strokes_8(rng: np.random.Generator) -> np.ndarray:
    """Random strokes at 32x32 shrunk by area to the dataset's 8x8."""
    big = Image.fromarray(_strokes(rng))
    return np.asarray(big.resize((8, 8), Image.Resampling.BOX), np.float32)


def _letter(rng: np.random.Generator, fonts: list[ImageFont.FreeTypeFont], side: int) -> np.ndarray:
    """One of TRAIN_LETTERS typeset in a random font and weight, bright on dark, at side x side
    (8: the dataset's size, shrunk by area)."""
    char = TRAIN_LETTERS[int(rng.integers(len(TRAIN_LETTERS)))]
    im = typeset_char(char, rng, fonts)
    return np.asarray(im.resize((side, side), Image.Resampling.BOX), np.float32)
