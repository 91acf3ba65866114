"""Grey pixels → the graph's input, as the export's manifest describes it: one definition that the
handler serves with and training trains with, so what a model saw in training is what it is sent.

A grey image here is an (H, W) float32 array in [0, 1] (bright strokes on a dark background: the
dataset's value v in 0..16 is v / 16). It is resized to the export's (height, width) (by area when
shrinking, bilinear when enlarging), repeated to its channels, normalised with its mean and std and
laid out as NCHW or NHWC.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from handlers.digits.settings import DigitsExport


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


def model_input(grey: np.ndarray, export: DigitsExport) -> np.ndarray:
    """One grey image → one graph input, (C, H, W) or (H, W, C) float32 normalised."""
    c, h, w = export.input_shape
    x = resize(grey, h, w)
    mean = np.asarray(export.mean, dtype=np.float32)[:, None, None]
    std = np.asarray(export.std, dtype=np.float32)[:, None, None]
    chw = (np.broadcast_to(x, (c, h, w)) - mean) / std
    out = chw if export.layout == "NCHW" else chw.transpose(1, 2, 0)
    return np.ascontiguousarray(out, dtype=np.float32)


def model_batch(greys: list[np.ndarray] | np.ndarray, export: DigitsExport) -> np.ndarray:
    """A batch of grey images → the graph's input array."""
    c, h, w = export.input_shape
    shape = (0, c, h, w) if export.layout == "NCHW" else (0, h, w, c)
    if len(greys) == 0:
        return np.zeros(shape, dtype=np.float32)
    return np.stack([model_input(g, export) for g in greys])
