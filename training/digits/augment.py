"""Augmentation: scikit-learn's 8x8 digits redrawn as the large images users send, so the network
learns the digits people draw and type through the same reading the handler serves with
(handlers/digits/pixels.py: polarity, levels, framing).

Each copy of a dataset digit is enlarged to 32 x 32 (bicubic), turned into a stroke of a random
width (a soft threshold at a random level, sometimes dilated or eroded), slanted, rotated and
stretched, placed at a random scale and position on a canvas of random size, given random ink and
paper levels in either polarity, and sometimes blurred or noised. Synthetic glyphs and typeset
digits in matplotlib's bundled fonts (glyphs.py) are finished the same way. Nothing here uses
Pillow's bundled font (Aileron) or shares code, templates or seeds with the held-out test of drawn
and typed digits (tests/support/drawn_digits.py).
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageFilter

from training.digits.glyphs import glyphs, typeset_glyphs


def _stroke(grey: np.ndarray, rng: np.random.Generator) -> Image.Image:
    """8x8 in [0, 1] → a 32 x 32 stroke image of random width ('F' mode, 0..1)."""
    big = np.asarray(
        Image.fromarray(grey.astype(np.float32)).resize((32, 32), Image.Resampling.BICUBIC)
    )
    level = rng.uniform(0.2, 0.6)
    stroke = np.clip((big - level) / 0.15 + 0.5, 0.0, 1.0).astype(np.float32)
    im = Image.fromarray(stroke)
    roll = rng.random()
    if roll < 0.2:
        im = im.filter(ImageFilter.MaxFilter(3))
    elif roll < 0.3:
        im = im.filter(ImageFilter.MaxFilter(5))
    elif roll < 0.4:
        im = im.filter(ImageFilter.MinFilter(3))
    return im


def _warped(im: Image.Image, rng: np.random.Generator) -> Image.Image:
    """Slant (shear), rotation and a horizontal stretch about the centre, on a canvas with room."""
    pad = 16
    side = im.size[0] + 2 * pad
    canvas = Image.new("F", (side, side), 0.0)
    canvas.paste(im, (pad, pad))
    slant = rng.uniform(-0.4, 0.4)
    turn = math.radians(rng.uniform(-15, 15))
    stretch = rng.uniform(0.6, 1.5)
    cos, sin = math.cos(turn), math.sin(turn)
    # forward: x' = stretch * (x - slant * y) rotated; PIL wants the inverse (output → input).
    a, b = stretch * cos, -stretch * slant * cos - sin
    d, e = stretch * sin, -stretch * slant * sin + cos
    det = a * e - b * d
    ia, ib, id_, ie = e / det, -b / det, -d / det, a / det
    c = side / 2
    coeffs = (ia, ib, c - ia * c - ib * c, id_, ie, c - id_ * c - ie * c)
    return canvas.transform((side, side), Image.Transform.AFFINE, coeffs,
                            Image.Resampling.BILINEAR)  # fmt: skip


def _placed(im: Image.Image, rng: np.random.Generator) -> np.ndarray:
    """The stroke image at a random scale and position on a canvas of 40..120 pixels a side."""
    arr = np.asarray(im)
    rows, cols = np.nonzero(arr > 0.25)
    if len(rows) == 0:
        return np.zeros((48, 48), np.float32)
    crop = im.crop((int(cols.min()), int(rows.min()), int(cols.max()) + 1, int(rows.max()) + 1))
    side = int(rng.integers(40, 121))
    height = side * rng.uniform(0.4, 0.9)
    scale = min(height / crop.size[1], 0.95 * side / crop.size[0])
    size = (max(1, round(crop.size[0] * scale)), max(1, round(crop.size[1] * scale)))
    crop = crop.resize(size, Image.Resampling.BILINEAR)
    canvas = Image.new("F", (side, side), 0.0)
    canvas.paste(crop, (int(rng.integers(0, side - size[0] + 1)),
                        int(rng.integers(0, side - size[1] + 1))))  # fmt: skip
    return np.asarray(canvas, np.float32)


def redrawn(grey: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One dataset digit (8x8, [0, 1]) → one large grey image of it in [0, 1], either polarity."""
    return finished(_stroke(grey, rng), rng)


def finished(stroke: Image.Image, rng: np.random.Generator) -> np.ndarray:
    """A 32 x 32 stroke image ('F', 0..1) → slanted, placed, levelled, maybe blurred, noised and
    inverted: a large grey image in [0, 1]."""
    ink = _placed(_warped(stroke, rng), rng)
    if rng.random() < 0.3:
        grey = Image.fromarray((np.clip(ink, 0.0, 1.0) * 255).astype(np.uint8))
        blurred = grey.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.5)))
        ink = np.asarray(blurred, np.float32) / 255.0
    paper, pen = rng.uniform(0.0, 0.25), rng.uniform(0.6, 1.0)
    img = paper + (pen - paper) * np.clip(ink, 0.0, 1.0)
    if rng.random() < 0.3:
        img = img + rng.normal(0.0, rng.uniform(0.01, 0.05), img.shape)
    if rng.random() < 0.5:
        img = 1.0 - img
    return np.clip(img, 0.0, 1.0).astype(np.float32)


def augmented(
    greys: np.ndarray,
    labels: np.ndarray,
    copies: int,
    seed: int,
    glyph_images: int = 0,
    font_images: int = 0,
) -> tuple[list[np.ndarray], np.ndarray]:
    """`copies` redrawn images of each dataset digit, then `glyph_images` synthetic glyphs and
    `font_images` typeset digits (glyphs.py) finished the same way, and their labels (seeded)."""
    rng = np.random.default_rng(seed)
    images = [redrawn(g, rng) for _ in range(copies) for g in greys]
    strokes, glyph_labels = glyphs(glyph_images, seed)
    images += [finished(stroke, rng) for stroke in strokes]
    typed, typed_labels = typeset_glyphs(font_images, seed)
    images += [finished(stroke, rng) for stroke in typed]
    return images, np.concatenate([np.tile(labels, copies), glyph_labels, typed_labels])
