"""The image kit's reading: grey pixels → the graph's input, as the export's manifest describes it:
one definition that the kit serves with and a model's training trains with, so what a model saw in
training is what it is sent.

A grey image here is an (H, W) float32 array in [0, 1]. Before the graph it is *read* the way
scikit-learn's digits were made (`read`): the dataset's digits are 32 x 32 bitmaps, bright strokes on
dark, whose ink fills the 32 rows and is centred across, counted down to 8 x 8 in 4 x 4 blocks. So:

1. polarity: the median of the image's border is its background; a bright border (> 0.5) means dark
   ink on a light ground, and the image is inverted (the answer's `polarity` says which was read);
2. levels: the background is subtracted and the ink's brightest pixel scaled to 1 (an image with
   less than MIN_CONTRAST between them is blank: all zeros);
3. framing, for images larger than the dataset's native size: the ink's bounding box is scaled,
   keeping its aspect, to fill FRAME x native rows (or columns, if wider than tall), centred, its
   strokes widened when thin (STROKE), and shrunk by area to the native size. An image at the native size (a JSON grid of 8 x 8, the
   dataset's own) is taken as already framed.

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


@dataclass(frozen=True)
class Reading:
    grey: np.ndarray
    """(native height, native width) float32 in [0, 1], bright ink on dark, framed."""
    polarity: str
    """One of POLARITIES: the image as sent."""


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
    codec decodes a large upload straight to this size (handlers/digits/codec.py), so the reading
    below gets what it would have made itself."""
    return max(1, min(height, width) // (2 * FRAME * min(native)))


def read(grey: np.ndarray, native: tuple[int, int]) -> Reading:
    """One grey image of any served size → the dataset's frame and the polarity read."""
    grey = np.asarray(grey, dtype=np.float32)
    k = working_factor(grey.shape[0], grey.shape[1], native)
    if k > 1:
        grey = block_mean(grey, k)
    ring = border(grey)
    background = float(np.partition(ring, len(ring) // 2)[len(ring) // 2])  # its median
    polarity = POLARITIES[int(background > 0.5)]
    if polarity == "dark_on_light":
        grey, background = 1.0 - grey, 1.0 - background
    ink = np.clip(grey - background, 0.0, None)
    top = float(ink.max())
    if top < MIN_CONTRAST:
        return Reading(np.zeros(native, np.float32), polarity)
    ink /= top
    if ink.shape != tuple(native):
        ink = framed(ink, native)
        ink = ink / max(float(ink.max()), 1e-6)
    return Reading(ink.astype(np.float32, copy=False), polarity)


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


def read_batch(
    greys: list[np.ndarray] | np.ndarray, export: ImageExport
) -> tuple[np.ndarray, list[str]]:
    """Grey images as sent → the graph's input array and the polarity read from each."""
    readings = [read(g, export.native_size) for g in greys]
    return graph_batch([r.grey for r in readings], export), [r.polarity for r in readings]


def model_input(grey: np.ndarray, export: ImageExport) -> np.ndarray:
    """One grey image as sent → one graph input."""
    return graph_input(read(grey, export.native_size).grey, export)


def model_batch(greys: list[np.ndarray] | np.ndarray, export: ImageExport) -> np.ndarray:
    """A batch of grey images as sent → the graph's input array."""
    return read_batch(greys, export)[0]
