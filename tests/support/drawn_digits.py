"""Digits as people make them, from a generator that training never uses: strokes drawn with
PIL.ImageDraw from stroke templates of its own (a paint program's brush: jitter, slant, rotation,
scale, position, stroke width, 64 x 64 and 200 x 200 canvases) and digits typed in Pillow's bundled
font (no system font), each in both polarities.

Training (training/digits/augment.py) augments scikit-learn's 8x8 digits and draws nothing from
these templates, this font or these seeds: this is the held-out test of how the served model reads
the digits users draw.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

Stroke = list[tuple[float, float]]


def _arc(cx: float, cy: float, rx: float, ry: float, a0: float, a1: float, n: int = 14) -> Stroke:
    """Points on an ellipse from angle a0 to a1 (degrees, 0 = right, 90 = down: image axes)."""
    return [
        (cx + rx * math.cos(math.radians(a)), cy + ry * math.sin(math.radians(a)))
        for a in np.linspace(a0, a1, n)
    ]


# Each digit: one or more strokes (polylines) in a unit box, x right, y down.
TEMPLATES: dict[int, list[list[Stroke]]] = {
    0: [[_arc(0.5, 0.5, 0.32, 0.46, -90, 275, 24)], [_arc(0.5, 0.5, 0.26, 0.46, 200, 565, 24)]],
    1: [[[(0.3, 0.22), (0.55, 0.03), (0.55, 0.97)]], [[(0.5, 0.03), (0.5, 0.97)]],
        [[(0.32, 0.2), (0.55, 0.03), (0.55, 0.97)], [(0.3, 0.97), (0.8, 0.97)]]],
    2: [[_arc(0.5, 0.3, 0.3, 0.26, 190, 360, 10) + [(0.78, 0.4), (0.18, 0.97), (0.85, 0.97)]],
        [_arc(0.48, 0.28, 0.3, 0.25, 180, 400, 12) + [(0.2, 0.96), (0.84, 0.94)]]],
    3: [[_arc(0.48, 0.26, 0.3, 0.23, 200, 450, 14) + _arc(0.48, 0.73, 0.33, 0.25, 270, 510, 14)],
        [[(0.2, 0.04), (0.8, 0.04), (0.45, 0.42)] + _arc(0.48, 0.7, 0.33, 0.27, 280, 500, 14)]],
    4: [[[(0.65, 0.97), (0.65, 0.03), (0.12, 0.68), (0.88, 0.68)]],
        [[(0.3, 0.03), (0.18, 0.6), (0.85, 0.6)], [(0.66, 0.25), (0.66, 0.97)]]],
    5: [[[(0.82, 0.04), (0.3, 0.04), (0.24, 0.45)] + _arc(0.48, 0.68, 0.33, 0.28, 235, 500, 16)],
        [[(0.3, 0.04), (0.26, 0.46)] + _arc(0.5, 0.68, 0.32, 0.27, 225, 510, 16),
         [(0.3, 0.05), (0.8, 0.05)]]],
    6: [[_arc(0.72, 0.5, 0.5, 0.47, 270, 180, 10) + _arc(0.5, 0.71, 0.28, 0.26, 180, 540, 20)],
        [[(0.66, 0.03), (0.3, 0.5)] + _arc(0.5, 0.72, 0.27, 0.25, 200, 560, 20)]],
    7: [[[(0.14, 0.05), (0.86, 0.05), (0.4, 0.97)]],
        [[(0.14, 0.06), (0.86, 0.05), (0.45, 0.97)], [(0.35, 0.5), (0.8, 0.5)]]],
    8: [[_arc(0.5, 0.26, 0.24, 0.22, 90, 450, 20) + _arc(0.5, 0.72, 0.3, 0.25, -90, 270, 22)],
        [_arc(0.5, 0.27, 0.22, 0.23, 0, 360, 20), _arc(0.5, 0.73, 0.28, 0.24, 0, 360, 22)]],
    9: [[_arc(0.48, 0.3, 0.28, 0.26, 0, 365, 20) + [(0.76, 0.32), (0.7, 0.97)]],
        [_arc(0.5, 0.29, 0.28, 0.25, -10, 360, 20) + [(0.78, 0.3), (0.45, 0.97)]]],
}  # fmt: skip


@dataclass(frozen=True)
class Sample:
    grey: np.ndarray
    """(H, W) float32 in [0, 1], as the codec decodes an 8-bit grey upload."""
    label: int
    kind: str
    """"drawn" or "typed"."""
    polarity: str
    """"bright_on_dark" or "dark_on_light"."""


def _ink_and_paper(rng: np.random.Generator, polarity: str) -> tuple[int, int]:
    bright, dark = int(rng.integers(190, 256)), int(rng.integers(0, 50))
    return (bright, dark) if polarity == "bright_on_dark" else (dark, bright)


def drawn(label: int, rng: np.random.Generator, side: int, polarity: str) -> np.ndarray:
    """One digit brushed from a template with jitter, slant, rotation, scale, position and width."""
    strokes = TEMPLATES[label][int(rng.integers(len(TEMPLATES[label])))]
    ink, paper = _ink_and_paper(rng, polarity)
    height = side * rng.uniform(0.45, 0.85)
    width = height * rng.uniform(0.55, 0.85)
    slant, turn = rng.uniform(-0.35, 0.35), math.radians(rng.uniform(-12, 12))
    cx = side / 2 + rng.uniform(-0.12, 0.12) * side
    cy = side / 2 + rng.uniform(-0.08, 0.08) * side
    brush = max(1, int(round(side * rng.uniform(0.03, 0.09))))
    im = Image.new("L", (side, side), paper)
    draw = ImageDraw.Draw(im)
    for stroke in strokes:
        pts = []
        for x, y in stroke:
            x, y = x + rng.normal(0, 0.02), y + rng.normal(0, 0.02)
            u, v = (x - 0.5 - slant * (y - 0.5)) * width, (y - 0.5) * height
            pts.append((cx + u * math.cos(turn) - v * math.sin(turn),
                        cy + u * math.sin(turn) + v * math.cos(turn)))  # fmt: skip
        draw.line(pts, fill=ink, width=brush, joint="curve")
        r = brush / 2
        for x, y in (pts[0], pts[-1]):
            draw.ellipse((x - r, y - r, x + r, y + r), fill=ink)
    if rng.random() < 0.5:
        im = im.filter(ImageFilter.GaussianBlur(rng.uniform(0.3, 1.2) * side / 64))
    return np.asarray(im, np.float32) / 255.0


def typed(label: int, rng: np.random.Generator, side: int, polarity: str) -> np.ndarray:
    """One digit in Pillow's bundled font at a random size, weight and place."""
    ink, paper = _ink_and_paper(rng, polarity)
    im = Image.new("L", (side, side), paper)
    font = ImageFont.load_default(size=int(side * rng.uniform(0.5, 0.9)))
    at = (side / 2 + rng.uniform(-0.1, 0.1) * side, side / 2 + rng.uniform(-0.1, 0.1) * side)
    weight = int(rng.integers(0, 3)) * side // 64
    ImageDraw.Draw(im).text(
        at, str(label), fill=ink, font=font, anchor="mm", stroke_width=weight, stroke_fill=ink
    )
    return np.asarray(im, np.float32) / 255.0


POLARITIES = ("bright_on_dark", "dark_on_light")


def held_out_set(per_digit: int = 6, typed_per_digit: int = 4, seed: int = 2024) -> list[Sample]:
    """Per polarity: `per_digit` drawn images of each digit (half 64 x 64, half 200 x 200) and
    `typed_per_digit` typed ones (64 x 64)."""
    rng = np.random.default_rng(seed)
    out = []
    for polarity in POLARITIES:
        for label in range(10):
            for i in range(per_digit):
                side = 64 if i % 2 == 0 else 200
                out.append(Sample(drawn(label, rng, side, polarity), label, "drawn", polarity))
            for _ in range(typed_per_digit):
                out.append(Sample(typed(label, rng, 64, polarity), label, "typed", polarity))
    return out


def groups(samples: list[Sample]) -> Iterator[tuple[str, str, list[Sample]]]:
    """(kind, polarity, samples) for each kind and polarity present."""
    for kind in ("drawn", "typed"):
        for polarity in POLARITIES:
            group = [s for s in samples if s.kind == kind and s.polarity == polarity]
            if group:
                yield kind, polarity, group
