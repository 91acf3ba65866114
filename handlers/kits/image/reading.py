"""The image kit's reading: grey pixels → the graph's input, as the export's manifest describes it:
one definition that the kit serves with and a model's training trains with, so what a model saw in
training is what it is sent.

A grey image here is an (H, W) float32 array in [0, 1]. Before the graph it is *read* the way
scikit-learn's digits were made (`read`): the dataset's digits are 32 x 32 bitmaps, bright strokes on
dark, whose ink fills the 32 rows and is centred across, counted down to 8 x 8 in 4 x 4 blocks. So:

1. polarity: for an image larger than the native size, the paper is its most common grey level
   and the ink lies on the side of it where the larger deviations are (strokes are far from the
   paper's level, noise and light gradients as much above as below), so a dark frame, a box or a
   table around a light card does not turn it over; where no side tells (nothing but paper), and
   for an image at the native size, the median of the border decides: a bright border (> 0.5)
   means dark ink on a light ground. Dark ink on light is inverted (the answer's `polarity` says
   which was read);
2. levels: the paper is subtracted and the ink's brightest pixel scaled to 1 (an image with less
   than MIN_CONTRAST between them is blank: all zeros);
3. strokes, for images larger than the native size (`strokes`): the ink's connected components;
   long thin straight lines (a ruled line, a frame's or a box's edge), a ring touching all four
   borders (a frame) and a thin outline around other ink (a box) are not the digit, nor specks;
   what is left is grouped by nearness, the largest group is the digit and the rest is erased.
   The answer's `digits_found` counts the groups of a digit's size (0: none, 2: two digits side by
   side, and the larger is the one read);
4. framing, for images larger than the dataset's native size: the digit's bounding box is scaled,
   keeping its aspect, to fill FRAME x native rows (or columns, if wider than tall), centred, its
   strokes widened when thin (STROKE), and shrunk by area to the native size. An image at the
   native size (a JSON grid of 8 x 8, the dataset's own) is taken as already framed.

The read image is then resized to the export's (height, width) (by area when shrinking, bilinear
when enlarging), repeated to its channels, normalised with its mean and std and laid out as NCHW
or NHWC (`graph_batch`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from handlers.kits.image.settings import ImageExport

POLARITIES = ("bright_on_dark", "dark_on_light")
"""What an answer's `polarity` says was read: bright strokes on a dark ground (the dataset's), or
dark ink on a light ground (inverted before the graph)."""
FRAME = 4
"""load_digits' 8 x 8 images count 4 x 4 blocks of a 32 x 32 bitmap: a large image's digit is fitted
into FRAME times the native size before it is shrunk by area."""
MIN_CONTRAST = 0.1
"""Ink at most this much brighter than the background (about 25 grey levels of 255): blank."""
STROKE = 0.2
"""The ink a framed digit covers at least (its mean over the frame): thinner strokes are widened
one pixel of the frame each way, at most WIDEN times. load_digits' pen covers 0.3 on average (thick
pen on a 32 x 32 bitmap); a digit drawn with a 3-pixel brush on 200 x 200 covers a third of that."""
WIDEN = 3
INK = 0.25
"""Pixels at least this fraction of the ink's brightest count toward the bounding box (leaves out
blur, anti-aliasing and JPEG ringing)."""
SURE = 1.5
"""The paper's level decides the polarity when the deviations on one side of it are at least this
many times those on the other; else the border does (nothing but paper)."""
PAPER_BINS = 32
STROKES_SIDE = 40
"""The strokes are found on the stroke mask shrunk (a block on when any of its pixels is) by the
whole factor that leaves its short side at least this: the components cost its pixel count."""
STROKE_LEVEL = 0.4
"""Ink at least this fraction of its brightest is a stroke pixel for the components (`strokes`)."""
LINE = 0.6
"""A straight run of stroke pixels this fraction of the image's width (rows) or VERTICAL of its
height (columns) is a line, not a digit's bar, when its band is thin (THIN of the side at most)."""
VERTICAL = 0.9
THIN = 0.08
SPECK = 0.002
"""Components smaller than this fraction of the image (and a tenth of the largest) are specks."""
NEAR = 0.25
"""Components whose boxes come within this fraction of the larger one's height are one group."""
DIGIT_SIZE = 0.45
"""A group at least this fraction of the largest group's height (and a tenth of its ink) counts as
a digit in `digits_found`."""


@dataclass(frozen=True)
class Reading:
    grey: np.ndarray
    """(native height, native width) float32 in [0, 1], bright ink on dark, framed."""
    polarity: str
    """One of POLARITIES: the image as sent."""
    digits_found: int | None = None
    """Groups of strokes of a digit's size (`strokes`): 1 for a digit, 0 blank, 2 or more several
    digits (the largest is read). None at the native size, taken as one framed digit."""


def resize(grey: np.ndarray, height: int, width: int) -> np.ndarray:
    """(h, w) float32 → (height, width) float32; area averaging when shrinking (every source
    pixel counts once), bilinear when enlarging."""
    grey = np.asarray(grey, dtype=np.float32)
    if grey.shape == (height, width):
        return grey
    shrink = grey.shape[0] >= height and grey.shape[1] >= width
    resample = Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR
    out = Image.fromarray(grey).resize((width, height), resample)
    return np.asarray(out, dtype=np.float32)


def border(grey: np.ndarray) -> np.ndarray:
    """The pixels of the image's outer ring, 1/16 of its shorter side wide (at least one)."""
    h, w = grey.shape
    k = max(1, min(h, w) // 16)
    return np.concatenate(
        [grey[:k].ravel(), grey[-k:].ravel(), grey[k:-k, :k].ravel(), grey[k:-k, -k:].ravel()]
    )


def widened(ink: np.ndarray) -> np.ndarray:
    """Each pixel the brightest of its 3 x 3 neighbourhood: strokes one pixel wider each way."""
    rows = ink.copy()
    np.maximum(rows[1:], ink[:-1], out=rows[1:])
    np.maximum(rows[:-1], ink[1:], out=rows[:-1])
    out = rows.copy()
    np.maximum(out[:, 1:], rows[:, :-1], out=out[:, 1:])
    np.maximum(out[:, :-1], rows[:, 1:], out=out[:, :-1])
    return out


def block_mean(grey: np.ndarray, k: int) -> np.ndarray:
    """Area shrink by a whole factor k: each k x k block's mean (a last partial block's own)."""
    return np.asarray(Image.fromarray(np.asarray(grey, np.float32)).reduce(k), np.float32)


def _span(on: Any) -> tuple[int, int]:
    """First and one-past-last index where `on` is true (it is somewhere)."""
    idx = np.flatnonzero(on)
    return int(idx[0]), int(idx[-1]) + 1


def framed(ink: np.ndarray, native: tuple[int, int]) -> np.ndarray:
    """Ink in [0, 1] (its brightest 1) → its bounding box fitted into FRAME x native, centred,
    shrunk by area to native."""
    fh, fw = FRAME * native[0], FRAME * native[1]
    on = ink >= INK
    (y0, y1), (x0, x1) = _span(np.any(on, axis=1)), _span(np.any(on, axis=0))
    box = ink[y0:y1, x0:x1]
    scale = min(fh / box.shape[0], fw / box.shape[1])
    th = min(fh, max(1, round(box.shape[0] * scale)))
    tw = min(fw, max(1, round(box.shape[1] * scale)))
    canvas = np.zeros((fh, fw), np.float32)
    top, left = (fh - th) // 2, (fw - tw) // 2
    canvas[top : top + th, left : left + tw] = resize(box, th, tw)
    for _ in range(WIDEN):
        if canvas.mean() >= STROKE:
            break
        canvas = widened(canvas)
    return block_mean(canvas, FRAME)


def working_factor(height: int, width: int, native: tuple[int, int]) -> int:
    """The whole factor an image of height x width is first shrunk by (block means): the frame is
    FRAME x native, and pixels much finer than twice that only cost time. 1: kept as it is. The
    codec decodes a large upload straight to this size (handlers/kits/image/decode.py), so the reading
    below gets what it would have made itself."""
    return max(1, min(height, width) // (2 * FRAME * min(native)))


def polarity_of(grey: np.ndarray) -> tuple[str, float]:
    """(polarity, paper level) of a grey image larger than the native size: the paper is its most
    common level (`paper_level`), and the ink lies on the side of it where the larger deviations
    are (SURE); an image with no side that tells (nothing but paper) by its border's median."""
    paper = paper_level(grey)
    above = float(np.clip(grey - paper, 0, None).mean())
    below = float(np.clip(paper - grey, 0, None).mean())
    if max(above, below) >= SURE * min(above, below) and max(above, below) > 0.002:
        return POLARITIES[int(below > above)], paper
    return polarity_of_border(grey)


def paper_level(grey: np.ndarray) -> float:
    """The most common grey level (a histogram of PAPER_BINS bins, its peak): the paper, which
    covers more of a photographed card than its strokes, its frame or the table around it; the
    median of the pixels in the peak bin and its two neighbours, for a finer level."""
    counts, edges = np.histogram(grey, bins=PAPER_BINS, range=(0.0, 1.0))
    peak = int(np.argmax(counts))
    lo, hi = edges[max(peak - 1, 0)], edges[min(peak + 2, PAPER_BINS)]
    near = grey[(grey >= lo) & (grey <= hi)]
    return float(np.median(near))


def components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """8-connected components of a boolean mask: (labels, count), labels 0 off the mask and 1..count
    on it (numbered by their first pixel in reading order). Minimum propagation with pointer
    jumping, in numpy (no scipy when serving)."""
    h, w = mask.shape
    none = h * w
    on = np.flatnonzero(mask)
    if len(on) == 0:
        return np.zeros((h, w), np.int32), 0
    lab = np.full(none, none, np.int64)
    lab[on] = on
    grid = np.full((h + 2, w + 2), none, np.int64)
    rows = np.empty((h + 2, w), np.int64)
    while True:
        before = lab[on]
        grid[1:-1, 1:-1] = lab.reshape(h, w)
        np.minimum(grid[:, :-2], grid[:, 1:-1], out=rows)
        np.minimum(rows, grid[:, 2:], out=rows)
        lab[on] = np.minimum(np.minimum(rows[:-2], rows[1:-1]), rows[2:]).ravel()[on]
        while True:  # pointer jumping: a label is a pixel of the same component, lower or equal
            jumped = lab[lab[on]]
            if np.array_equal(jumped, lab[on]):
                break
            lab[on] = jumped
        if np.array_equal(before, lab[on]):
            break
    roots, inverse = np.unique(lab[on], return_inverse=True)
    out = np.zeros(none, np.int32)
    out[on] = inverse + 1
    return out.reshape(h, w), len(roots)


def _runs(mask: np.ndarray, length: int) -> np.ndarray:
    """Pixels of `mask` in a run of at least `length` along each row."""
    h, w = mask.shape
    if length > w or length < 2:
        return np.zeros_like(mask)
    sums = np.zeros((h, w + 1), np.int32)
    np.cumsum(mask, axis=1, out=sums[:, 1:])
    full = (sums[:, length:] - sums[:, :-length]) == length  # a run starts at column i
    starts = np.zeros((h, full.shape[1] + 1), np.int32)
    np.cumsum(full, axis=1, out=starts[:, 1:])
    j = np.arange(w)
    # Column j is covered by a run starting in [j - length + 1, j] (and within 0 .. w - length).
    covered = starts[:, np.minimum(j, w - length) + 1] - starts[:, np.maximum(j - length + 1, 0)]
    return mask & (covered > 0)


def _lines(mask: np.ndarray) -> np.ndarray:
    """Pixels of long thin straight lines: rows' runs of LINE x width, columns' of VERTICAL x
    height, in bands no thicker than THIN of the side (a digit's thick bar is not one)."""
    h, w = mask.shape
    out = np.zeros_like(mask)
    for runs, across, side in (
        (_runs(mask, int(round(LINE * w))), 0, h),
        (_runs(mask.T, int(round(VERTICAL * h))).T, 1, w),
    ):
        if not runs.any():
            continue
        labels, n = components(runs)
        for i in range(1, n + 1):
            band = labels == i
            thickness = int(np.any(band, axis=1 - across).sum())
            if thickness <= max(2, THIN * side):
                out |= band
    return out


def _boxes(labels: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """(area, y0, x0, y1, x1) of components 1..n, as arrays indexed 0..n-1."""
    h, w = labels.shape
    idx = labels.ravel()
    on = idx > 0
    ys, xs = np.divmod(np.flatnonzero(on), w)
    lab = idx[on] - 1
    area = np.bincount(lab, minlength=n)
    y0, x0 = np.full(n, h), np.full(n, w)
    y1, x1 = np.zeros(n, np.int64), np.zeros(n, np.int64)
    np.minimum.at(y0, lab, ys)
    np.minimum.at(x0, lab, xs)
    np.maximum.at(y1, lab, ys + 1)
    np.maximum.at(x1, lab, xs + 1)
    return area, y0, x0, y1, x1


def _outlines(labels: np.ndarray, n: int) -> np.ndarray:
    """Which components 1..n (indexed 0..n-1) are outlines around the rest: a thin ring touching
    all four borders (a frame), or a thin outline whose box holds other ink (a box)."""
    h, w = labels.shape
    area, y0, x0, y1, x1 = _boxes(labels, n)
    fill = area / ((y1 - y0) * (x1 - x0))
    frame = (y0 == 0) & (x0 == 0) & (y1 == h) & (x1 == w) & (fill < 0.5)
    out = frame.copy()
    for a in np.flatnonzero(fill < 0.4):
        inside = (y0 > y0[a]) & (x0 > x0[a]) & (y1 < y1[a]) & (x1 < x1[a])
        if np.any(inside & (area >= 0.05 * area[a])):
            out[a] = True
    return out


def _any_blocks(mask: np.ndarray, f: int) -> np.ndarray:
    """A boolean mask shrunk by a whole factor f: a block is on when any of its pixels is."""
    if f == 1:
        return mask
    h, w = mask.shape
    padded = np.zeros((-(-h // f) * f, -(-w // f) * f), bool)
    padded[:h, :w] = mask
    blocks = padded.reshape(padded.shape[0] // f, f, padded.shape[1] // f, f)
    return np.asarray(blocks.any(axis=(1, 3)))


def strokes(ink: np.ndarray) -> tuple[np.ndarray, int]:
    """(the digit's ink, digits_found) of levelled ink (brightest 1): frames, boxes, long thin lines
    and specks left out, and of what remains the largest group (NEAR) kept, the rest erased."""
    full = ink >= STROKE_LEVEL
    f = max(1, min(ink.shape) // STROKES_SIDE)
    mask = _any_blocks(full, f)
    h, w = mask.shape
    labels, n = components(mask)
    if n == 0:
        return ink, 0
    outlines = _outlines(labels, n)
    if outlines.any():
        mask &= ~np.isin(labels, np.flatnonzero(outlines) + 1)
    lines = _lines(mask)
    if lines.any():
        mask &= ~lines
    if outlines.any() or lines.any():
        labels, n = components(mask)
        if n == 0:
            return np.zeros_like(ink), 0
    area, y0, x0, y1, x1 = _boxes(labels, n)
    kept = np.flatnonzero(area >= max(SPECK * h * w, 0.1 * area.max()))
    if len(kept) == 0:  # specks only: no digit here, and nothing to erase
        return ink, 0
    # Groups: components whose boxes, grown by NEAR of the taller one's height, meet.
    group = np.arange(n)
    for i, a in enumerate(kept):
        for b in kept[i + 1 :]:
            m = NEAR * max(y1[a] - y0[a], y1[b] - y0[b])
            if (x0[a] - m < x1[b] and x0[b] - m < x1[a]
                    and y0[a] - m < y1[b] and y0[b] - m < y1[a]):  # fmt: skip
                group[group == group[b]] = group[a]
    sizes = []
    for g in np.unique(group[kept]):
        members = kept[group[kept] == g]
        sizes.append(
            (int(area[members].sum()), int(y1[members].max() - y0[members].min()), members)
        )
    ink_area, tall, members = max(sizes, key=lambda t: t[0])
    found = sum(1 for a, t, _ in sizes if t >= DIGIT_SIZE * tall and a >= 0.1 * ink_area)
    digit = np.isin(labels, members + 1)
    if f > 1:
        digit = np.repeat(np.repeat(digit, f, axis=0), f, axis=1)[: ink.shape[0], : ink.shape[1]]
        digit &= full
    halo = widened(widened(digit.astype(np.float32))) > 0  # anti-aliasing and blur beside it
    return np.where(halo, ink, 0.0).astype(np.float32), found


def read(grey: np.ndarray, native: tuple[int, int]) -> Reading:
    """One grey image of any served size → the dataset's frame and the polarity read."""
    grey = np.asarray(grey, dtype=np.float32)
    k = working_factor(grey.shape[0], grey.shape[1], native)
    if k > 1:
        grey = block_mean(grey, k)
    at_native = grey.shape == tuple(native)
    polarity, background = polarity_of(grey) if not at_native else polarity_of_border(grey)
    if polarity == "dark_on_light":
        grey, background = 1.0 - grey, 1.0 - background
    ink = np.clip(grey - background, 0.0, None)
    top = float(ink.max())
    if top < MIN_CONTRAST:
        return Reading(np.zeros(native, np.float32), polarity, None if at_native else 0)
    ink /= top
    if at_native:
        return Reading(ink.astype(np.float32, copy=False), polarity)
    ink, found = strokes(ink)
    top = float(ink.max())
    if top < MIN_CONTRAST:
        return Reading(np.zeros(native, np.float32), polarity, 0)
    ink = framed(ink / top, native)
    ink = ink / max(float(ink.max()), 1e-6)
    return Reading(ink.astype(np.float32, copy=False), polarity, found)


def polarity_of_border(grey: np.ndarray) -> tuple[str, float]:
    """(polarity, background) from the border's median alone: the native size's rule."""
    ring = border(grey)
    background = float(np.partition(ring, len(ring) // 2)[len(ring) // 2])  # its median
    return POLARITIES[int(background > 0.5)], background


def graph_input(grey: np.ndarray, export: ImageExport) -> np.ndarray:
    """One read image → one graph input, (C, H, W) or (H, W, C) float32 normalised."""
    c, h, w = export.input_shape
    x = resize(grey, h, w)
    mean = np.asarray(export.mean, dtype=np.float32)[:, None, None]
    std = np.asarray(export.std, dtype=np.float32)[:, None, None]
    chw = (np.broadcast_to(x, (c, h, w)) - mean) / std
    out = chw if export.layout == "NCHW" else chw.transpose(1, 2, 0)
    return np.ascontiguousarray(out, dtype=np.float32)


def graph_batch(greys: list[np.ndarray] | np.ndarray, export: ImageExport) -> np.ndarray:
    """Read images (any size: each is resized) → the graph's input array."""
    c, h, w = export.input_shape
    shape = (0, c, h, w) if export.layout == "NCHW" else (0, h, w, c)
    if len(greys) == 0:
        return np.zeros(shape, dtype=np.float32)
    return np.stack([graph_input(g, export) for g in greys])


def model_batch(greys: list[np.ndarray] | np.ndarray, export: ImageExport) -> np.ndarray:
    """A batch of grey images as sent → the graph's input array."""
    return graph_batch([read(g, export.native_size).grey for g in greys], export)
