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


def drawn(
    label: int,
    rng: np.random.Generator,
    side: int,
    polarity: str,
    levels: tuple[int, int] | None = None,
) -> np.ndarray:
    """One digit brushed from a template with jitter, slant, rotation, scale, position and width;
    `levels`: (ink, paper) grey levels, else drawn at random for the polarity."""
    strokes = TEMPLATES[label][int(rng.integers(len(TEMPLATES[label])))]
    ink, paper = levels if levels is not None else _ink_and_paper(rng, polarity)
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


def typed(
    label: int,
    rng: np.random.Generator,
    side: int,
    polarity: str,
    levels: tuple[int, int] | None = None,
) -> np.ndarray:
    """One digit in Pillow's bundled font at a random size, weight and place."""
    ink, paper = levels if levels is not None else _ink_and_paper(rng, polarity)
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


# Digits with something around them: frames, boxes, ruled lines, perspective, two digits, none.
# Its own seeds and drawing code; training (training/digits/augment.py) draws its frames, boxes,
# lines and perspective with code of its own and never calls these.

CONDITIONS = (
    "dark_frame",
    "grey_frame",
    "thin_frame",
    "ruled_line",
    "box",
    "perspective",
)
"""Conditions where a digit is there to be read (`condition_set`)."""


@dataclass(frozen=True)
class Scene:
    grey: np.ndarray
    """(H, W) float32 in [0, 1]."""
    label: int | None
    """The digit, or None (two digits or none: `odd_scenes`)."""
    condition: str
    digits: int
    """How many digits the image shows."""


def _digit(label: int, rng: np.random.Generator, side: int, polarity: str, levels) -> np.ndarray:
    """A drawn or typed digit (half each) on a `side` square of paper, as uint8-scaled floats."""
    if rng.random() < 0.5:
        return drawn(label, rng, side, polarity, levels) * 255.0
    return typed(label, rng, side, polarity, levels) * 255.0


def _on_paper(digit: np.ndarray, side: int, at: tuple[int, int], paper: int) -> Image.Image:
    canvas = np.full((side, side), float(paper), np.float32)
    h, w = digit.shape
    canvas[at[0] : at[0] + h, at[1] : at[1] + w] = digit
    return Image.fromarray(np.clip(canvas, 0, 255).astype(np.uint8))


def _perspective(im: Image.Image, rng: np.random.Generator, paper: int) -> Image.Image:
    """The image seen at an angle: each corner moved by up to 14 % of the side (PIL's perspective
    coefficients from the four corner pairs)."""
    side = im.size[0]
    src = [(0, 0), (side, 0), (side, side), (0, side)]
    dst = [(x + rng.uniform(-0.14, 0.14) * side, y + rng.uniform(-0.14, 0.14) * side)
           for x, y in src]  # fmt: skip
    rows = []
    for (x, y), (u, v) in zip(dst, src, strict=True):  # output point → input point
        rows.append([x, y, 1, 0, 0, 0, -u * x, -u * y])
        rows.append([0, 0, 0, x, y, 1, -v * x, -v * y])
    coeffs = np.linalg.solve(np.array(rows), np.array(src, float).ravel())
    return im.transform((side, side), Image.Transform.PERSPECTIVE, tuple(coeffs),
                        Image.Resampling.BILINEAR, fillcolor=paper)  # fmt: skip


def scene(condition: str, label: int, rng: np.random.Generator, polarity: str) -> np.ndarray:
    """One image of `label` under `condition` (CONDITIONS), 64 or 128 pixels a side."""
    side = int(rng.choice([64, 128]))
    ink, paper = _ink_and_paper(rng, polarity)
    if condition in ("dark_frame", "grey_frame", "thin_frame"):
        width = {"dark_frame": (0.05, 0.09), "grey_frame": (0.05, 0.12),
                 "thin_frame": (0.02, 0.02)}[condition]  # fmt: skip
        frame_w = max(1, int(round(side * rng.uniform(*width))))
        level = ink if condition != "grey_frame" else int(rng.integers(90, 170))
        inner = side - 2 * frame_w - 2 * int(side * rng.uniform(0.02, 0.08))
        offset = (side - inner) // 2
        im = _on_paper(_digit(label, rng, inner, polarity, (ink, paper)), side,
                       (offset, offset), paper)  # fmt: skip
        d = ImageDraw.Draw(im)
        for i in range(frame_w):
            d.rectangle((i, i, side - 1 - i, side - 1 - i), outline=level)
    elif condition == "box":
        inner = int(side * rng.uniform(0.55, 0.7))
        at = (int(rng.integers(side * 0.12, side - inner - side * 0.12 + 1)),) * 2
        im = _on_paper(_digit(label, rng, inner, polarity, (ink, paper)), side, at, paper)
        gap = int(side * rng.uniform(0.0, 0.05))
        pen = max(1, int(round(side * rng.uniform(0.015, 0.03))))
        ImageDraw.Draw(im).rectangle(
            (at[1] - gap - pen, at[0] - gap - pen, at[1] + inner + gap + pen,
             at[0] + inner + gap + pen), outline=ink, width=pen,
        )  # fmt: skip
    elif condition == "ruled_line":
        inner = int(side * rng.uniform(0.6, 0.8))
        top = int(rng.integers(0, side * 0.05 + 1))
        left = int(rng.integers(0, side - inner + 1))
        digit = _digit(label, rng, inner, polarity, (ink, paper))
        im = _on_paper(digit, side, (top, left), paper)
        on = np.flatnonzero(np.abs(digit - paper).max(axis=1) > 60)
        bottom = top + (int(on[-1]) if len(on) else inner)
        pen = max(1, int(round(side * rng.uniform(0.01, 0.03))))
        y = min(side - pen - 1, bottom + int(side * rng.uniform(-0.01, 0.06)))
        length = int(side * rng.uniform(0.7, 1.0))
        x0 = int(rng.integers(0, side - length + 1))
        ImageDraw.Draw(im).rectangle((x0, y, x0 + length, y + pen - 1), fill=ink)
    elif condition == "perspective":
        im = Image.fromarray(_digit(label, rng, side, polarity, (ink, paper)).astype(np.uint8))
        im = _perspective(im, rng, paper)
    else:
        raise ValueError(condition)
    return np.asarray(im, np.float32) / 255.0


def condition_set(per_digit: int = 6, seed: int = 51) -> list[Scene]:
    """`per_digit` images of each digit under each condition: frames on light paper with dark
    ink (a card on a table), boxes, ruled lines and perspective in both polarities in turn."""
    rng = np.random.default_rng(seed)
    out = []
    for condition in CONDITIONS:
        for label in range(10):
            for i in range(per_digit):
                framed = condition.endswith("_frame")
                polarity = POLARITIES[1] if framed else POLARITIES[i % 2]
                out.append(Scene(scene(condition, label, rng, polarity), label, condition, 1))
    return out


def odd_scenes(n: int = 20, seed: int = 52) -> list[Scene]:
    """Images that are not one digit: two digits side by side (`n`), and none (`n`: paper with a
    frame, a ruled line or a box only, or blank), in both polarities."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        polarity = POLARITIES[i % 2]
        ink, paper = _ink_and_paper(rng, polarity)
        side = int(rng.choice([64, 128]))
        a, b = rng.choice(10, 2)
        half = side // 2
        left = _digit(int(a), rng, half, polarity, (ink, paper))
        right = _digit(int(b), rng, half, polarity, (ink, paper))
        top = int(rng.integers(0, side - half + 1))
        canvas = np.full((side, side), float(paper), np.float32)
        canvas[top : top + half, :half] = left
        canvas[top : top + half, half : 2 * half] = right
        out.append(Scene(canvas / 255.0, None, "two_digits", 2))
    for i in range(n):
        polarity = POLARITIES[i % 2]
        ink, paper = _ink_and_paper(rng, polarity)
        side = int(rng.choice([64, 128]))
        im = Image.new("L", (side, side), paper)
        d = ImageDraw.Draw(im)
        kind = i % 4
        pen = max(1, int(side * rng.uniform(0.02, 0.07)))
        if kind == 0:
            d.rectangle((0, 0, side - 1, side - 1), outline=ink, width=pen)
        elif kind == 1:
            y = int(side * rng.uniform(0.6, 0.9))
            d.rectangle((0, y, side - 1, y + pen), fill=ink)
        elif kind == 2:
            m = int(side * rng.uniform(0.1, 0.25))
            d.rectangle((m, m, side - m, side - m), outline=ink, width=pen)
        out.append(Scene(np.asarray(im, np.float32) / 255.0, None, "none", 0))
    return out
