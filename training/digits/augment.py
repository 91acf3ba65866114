"""Augmentation: scikit-learn's 8x8 digits redrawn as the large images users send, so the network
learns the digits people draw and type through the same reading the handler serves with
(handlers/kits/image/reading.py: polarity, levels, framing).

Each copy of a dataset digit is enlarged to 32 x 32 (bicubic), turned into a stroke of a random
width (a soft threshold at a random level, sometimes dilated or eroded), slanted, rotated and
stretched, placed at a random scale and position on a canvas of random size, given random ink and
paper levels in either polarity, and sometimes blurred or noised; some have a frame, a box, a
ruled line or a perspective view (`surrounded`), which the reading's strokes must see past. Synthetic glyphs and typeset
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


def _perspective(ink: np.ndarray, rng: np.random.Generator, most: float) -> np.ndarray:
    """The canvas seen at an angle: its corners moved by up to `most` of the side, inward or out."""
    h, w = ink.shape
    corners = np.array([(0, 0), (w, 0), (w, h), (0, h)], float)
    moved = corners + rng.uniform(-most, most, (4, 2)) * (w, h)
    # PIL's eight coefficients map an output point to its input point: solved from the corners.
    a = np.zeros((8, 8))
    for i, ((x, y), (u, v)) in enumerate(zip(moved, corners, strict=True)):
        a[2 * i] = (x, y, 1, 0, 0, 0, -u * x, -u * y)
        a[2 * i + 1] = (0, 0, 0, x, y, 1, -v * x, -v * y)
    coeffs = np.linalg.solve(a, corners.ravel())
    out = Image.fromarray(ink).transform((w, h), Image.Transform.PERSPECTIVE, tuple(coeffs),
                                         Image.Resampling.BILINEAR)  # fmt: skip
    return np.asarray(out, np.float32)


def _pad(ink: np.ndarray, top: int, left: int, bottom: int, right: int) -> np.ndarray:
    return np.pad(ink, ((top, bottom), (left, right)))


def surrounded(ink: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sometimes what a photographed or scanned digit has around it, in ink units (0 paper, 1 pen):
    a frame at the edge of the image (pen-dark or grey, 1.5-13 % of the side), a box around the
    digit, a ruled line under it (touching or not, some of the image's width or all), or a
    perspective view of the whole."""
    roll = rng.random()
    if roll >= 0.45:
        return ink
    rows, cols = np.nonzero(ink > 0.25)
    if len(rows) == 0:
        return ink
    side = max(ink.shape)
    if roll < 0.15:  # a frame around the image, with some paper between it and the digit
        width = max(1, round(side * rng.uniform(0.015, 0.13)))
        margin = round(side * rng.uniform(0.0, 0.1))
        ink = _pad(ink, *(margin,) * 4)
        level = 1.0 if rng.random() < 0.6 else rng.uniform(0.25, 0.75)
        return np.pad(ink, width, constant_values=level)
    if roll < 0.25:  # a box around the digit
        y0, y1, x0, x1 = rows.min(), rows.max() + 1, cols.min(), cols.max() + 1
        gap = round(side * rng.uniform(0.01, 0.08))
        pen = max(1, round(side * rng.uniform(0.01, 0.04)))
        room = gap + pen + round(side * rng.uniform(0.0, 0.1))
        ink = _pad(ink, room, room, room, room)
        y0, y1, x0, x1 = (
            y0 + room - gap - pen,
            y1 + room + gap + pen,
            x0 + room - gap - pen,
            x1 + room + gap + pen,
        )
        box = np.zeros_like(ink)
        box[y0:y1, x0:x1] = 1.0
        box[y0 + pen : y1 - pen, x0 + pen : x1 - pen] = 0.0
        return np.maximum(ink, box * rng.uniform(0.6, 1.0))
    if roll < 0.33:  # a ruled line under the digit
        pen = max(1, round(side * rng.uniform(0.01, 0.035)))
        y = rows.max() + round(side * rng.uniform(-0.03, 0.08))
        ink = _pad(ink, 0, 0, max(0, y + pen + 2 - ink.shape[0]), 0)
        w = ink.shape[1]
        length = round(w * rng.uniform(0.65, 1.0))
        x0 = int(rng.integers(0, w - length + 1))
        ink = ink.copy()
        ink[y : y + pen, x0 : x0 + length] = np.maximum(ink[y : y + pen, x0 : x0 + length],
                                                        rng.uniform(0.6, 1.0))  # fmt: skip
        return ink
    return _perspective(ink, rng, rng.uniform(0.04, 0.16))


def redrawn(grey: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One dataset digit (8x8, [0, 1]) → one large grey image of it in [0, 1], either polarity."""
    return finished(_stroke(grey, rng), rng)


def finished(stroke: Image.Image, rng: np.random.Generator) -> np.ndarray:
    """A 32 x 32 stroke image ('F', 0..1) → slanted, placed, levelled, maybe blurred, noised and
    inverted: a large grey image in [0, 1]."""
    ink = surrounded(_placed(_warped(stroke, rng), rng), rng)
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
