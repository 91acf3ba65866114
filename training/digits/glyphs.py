"""Synthetic digit glyphs for training: each digit's usual construction (bowls, hooks, stems, bars)
from ImageDraw's ellipse, arc and line primitives with random proportions, so the network also sees
the round bowls and short hooks of printed and neatly written digits that scikit-learn's writers
seldom made (a 6 whose bowl is most of its height, a 9 with a straight stem).

Typeset digits (`typeset_glyphs`): the digits of the fonts matplotlib bundles (DejaVu Sans, Sans
Mono and Serif, STIX, Computer Modern; matplotlib is a pinned requirement, so every install has
them and no system font is needed), at random weights. Their 6 and 9 end in a curved tail or hook
that nearly closes at 8 x 8, a shape the dataset's writers and the stroke glyphs above seldom make.

The output is a 32 x 32 stroke image that training/digits/augment.py slants, places, levels and
inverts like a redrawn dataset digit. The held-out test generator (tests/support/drawn_digits.py:
polylines from its own templates, Pillow's bundled font Aileron) shares no code, shape, font or
seed with this.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

Box = tuple[float, float, float, float]
Pen = Callable[..., None]


def _zero(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    half = 5 + 5 * u[0]
    d.ellipse((16 - half, 2, 16 + half, 30), outline=255, width=w)


def _one(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    d.line((16, 2, 16, 30), fill=255, width=w)
    if u[0] < 0.6:
        d.line((16, 2, 16 - 4 - 5 * u[1], 6 + 4 * u[2]), fill=255, width=w)
    if u[3] < 0.3:
        d.line((10, 30, 22, 30), fill=255, width=w)


def _two(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    r = 7 + 3 * u[0]
    d.arc((16 - r, 2, 16 + r, 2 + 2 * r), 160, 400 - 30 * u[1], fill=255, width=w)
    end = (16 + r * 0.8, 2 + r * 1.5)
    d.line((*end, 16 - r, 30), fill=255, width=w)
    d.line((16 - r, 30, 16 + r + 1, 30), fill=255, width=w)


def _three(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    r1, r2 = 6 + 2 * u[0], 7 + 3 * u[1]
    mid = 13 + 4 * u[2]
    d.arc((15 - r1, mid - 2 * r1, 15 + r1, mid), 170, 450, fill=255, width=w)
    d.arc((15 - r2, mid, 15 + r2, 30), 270, 520 + 20 * u[3], fill=255, width=w)


def _four(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    x = 18 + 4 * u[0]
    bar = 19 + 4 * u[1]
    if u[2] < 0.5:
        d.line((x, 30, x, 2, 6, bar, 27, bar), fill=255, width=w)
    else:
        d.line((9 + 3 * u[3], 2, 7, bar, 27, bar), fill=255, width=w)
        d.line((x, 8, x, 30), fill=255, width=w)


def _five(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    r = 8 + 3 * u[0]
    top = 30 - 2 * r
    d.line((24, 2, 11, 2, 10, top + 2), fill=255, width=w)
    d.arc((16 - r, top, 16 + r, 30), 215, 505 - 20 * u[1], fill=255, width=w)


def _six(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    r = 6 + 4 * u[0]
    top = 30 - 2 * r
    d.ellipse((16 - r, top, 16 + r, 30), outline=255, width=w)
    big = 14 + 10 * u[1]
    d.arc((16 - r, 2, 16 - r + 2 * big, 2 + 2 * big), 180, 250 + 90 * u[2], fill=255, width=w)
    d.line((16 - r, 2 + big, 16 - r, top + r), fill=255, width=w)


def _seven(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    foot = 10 + 8 * u[0]
    d.line((7, 2, 25, 2, foot, 30), fill=255, width=w)
    if u[1] < 0.25:
        d.line((11, 16, 24, 16), fill=255, width=w)


def _eight(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    mid = 13 + 4 * u[0]
    r1, r2 = 5 + 3 * u[1], 7 + 3 * u[2]
    d.ellipse((16 - r1, 2, 16 + r1, mid), outline=255, width=w)
    d.ellipse((16 - r2, mid, 16 + r2, 30), outline=255, width=w)


def _nine(d: ImageDraw.ImageDraw, u: np.ndarray, w: int) -> None:
    r = 6 + 4 * u[0]
    d.ellipse((16 - r, 2, 16 + r, 2 + 2 * r), outline=255, width=w)
    if u[1] < 0.5:
        d.line((16 + r, 2 + r, 16 + r - 3 * u[2], 30), fill=255, width=w)
    else:
        big = 14 + 10 * u[2]
        d.arc((16 + r - 2 * big, 30 - 2 * big, 16 + r, 30), 0, 70 + 90 * u[3], fill=255, width=w)
        d.line((16 + r, 2 + r, 16 + r, 30 - big), fill=255, width=w)


DRAW = (_zero, _one, _two, _three, _four, _five, _six, _seven, _eight, _nine)


def glyph(label: int, rng: np.random.Generator) -> Image.Image:
    """One 32 x 32 stroke image ('F' mode, 0..1) of `label`, random proportions and pen width."""
    im = Image.new("L", (32, 32), 0)
    DRAW[label](ImageDraw.Draw(im), rng.uniform(0, 1, 4), int(rng.integers(2, 6)))
    return Image.fromarray(np.asarray(im, np.float32) / 255.0)


def glyphs(n: int, seed: int) -> tuple[list[Image.Image], np.ndarray]:
    """n glyphs, the digits in turn, and their labels."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n, dtype=np.int64) % 10
    return [glyph(int(k), rng) for k in labels], labels


FONT_FILES = (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf", "DejaVuSans-BoldOblique.ttf",
    "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf",
    "DejaVuSerif-Italic.ttf", "STIXGeneral.ttf", "STIXGeneralBol.ttf", "STIXGeneralItalic.ttf",
    "cmr10.ttf", "cmss10.ttf", "cmtt10.ttf", "cmb10.ttf",
)  # fmt: skip
"""The fonts typeset glyphs are drawn in: files of matplotlib's mpl-data/fonts/ttf. Never Pillow's
bundled Aileron (ImageFont.load_default), the font of the held-out typed digits."""
FONT_SIZE = 64
"""Rendering size in points (pixels) before the glyph is fitted into its 32 x 32 frame."""


def font_paths() -> list[Path]:
    """FONT_FILES in matplotlib's data directory (a clear error if one is missing)."""
    import matplotlib

    root = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    paths = [root / name for name in FONT_FILES]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"fonts for typeset digit glyphs not found: {missing}")
    return paths


def font_faces(size: int = FONT_SIZE) -> list[ImageFont.FreeTypeFont]:
    """The fonts of FONT_FILES at `size`."""
    return [ImageFont.truetype(str(p), size) for p in font_paths()]


def typeset(
    label: int, rng: np.random.Generator, fonts: list[ImageFont.FreeTypeFont]
) -> Image.Image:
    """One 32 x 32 stroke image ('F' mode, 0..1) of `label` in a random font and weight: its ink
    fitted into rows 2..30, centred across, like glyph()'s."""
    return typeset_char(str(label), rng, fonts)


def typeset_char(
    char: str, rng: np.random.Generator, fonts: list[ImageFont.FreeTypeFont]
) -> Image.Image:
    """typeset()'s rendering of any character (the outlier bank's letters use it too)."""
    canvas = 2 * FONT_SIZE
    im = Image.new("L", (canvas, canvas), 0)
    weight = int(rng.integers(0, 4))  # pixels of stroke added each way at FONT_SIZE
    font = fonts[int(rng.integers(len(fonts)))]
    ImageDraw.Draw(im).text((canvas / 2, canvas / 2), char, fill=255, font=font,
                            anchor="mm", stroke_width=weight, stroke_fill=255)  # fmt: skip
    crop = im.crop(im.getbbox())
    scale = 28 / crop.size[1]
    size = (min(32, max(1, round(crop.size[0] * scale))), 28)
    out = Image.new("L", (32, 32), 0)
    out.paste(crop.resize(size, Image.Resampling.BOX), ((32 - size[0]) // 2, 2))
    return Image.fromarray(np.asarray(out, np.float32) / 255.0)


def typeset_glyphs(n: int, seed: int) -> tuple[list[Image.Image], np.ndarray]:
    """n typeset glyphs, the digits in turn, and their labels (seeded; its own stream, apart from
    glyphs()'s)."""
    rng = np.random.default_rng([seed, 1])
    fonts = font_faces() if n else []
    labels = np.arange(n, dtype=np.int64) % 10
    return [typeset(int(k), rng, fonts) for k in labels], labels
