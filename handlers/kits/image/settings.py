"""The image kit's settings, parsed once at load from the archive: what an image classifier's
export is (`ImageExport`, the manifest's `handler` block, written by training) and the kit's
serving knobs (`ImageSettings`, model-config.yaml's `handler:` block, with the knobs every model
has from handlers/settings.py). The network is never named here: input name, shape, layout,
channels, normalisation and classes all come from the export, so any image classifier exported
with this block serves through the kit. A bad value fails the load, never a request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal, Self

from pydantic import Field

from handlers.errors import ArchiveError
from handlers.manifest import (
    handler_block,
    manifest_version,
    names,
    positive_int,
    reject_unknown_export,
    require,
    text,
)
from handlers.settings import PositiveInt, ServingSettings

LAYOUTS = ("NCHW", "NHWC")
CHANNELS = (1, 3)
"""Grey (1) or the grey level repeated in 3 channels (an RGB-shaped network)."""


def _numbers(value: Any, name: str, count: int | None = None) -> tuple[float, ...]:
    ok = isinstance(value, list | tuple) and all(
        isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in value
    )
    if not ok or not value or (count is not None and len(value) != count):
        size = f"{count} " if count is not None else ""
        raise ArchiveError(f"{name} must be a list of {size}finite numbers, not {value!r}")
    return tuple(float(v) for v in value)


@dataclass(frozen=True)
class ImageExport:
    """The manifest's `handler` block. Training builds one and writes `to_block()`; serving reads
    it with `from_block`, so each key is named here and nowhere else."""

    input_name: str
    """The graph's one input."""
    output_name: str
    """The graph's logits output, (batch, classes)."""
    input_shape: tuple[int, int, int]
    """(channels, height, width) of one image, whatever the layout."""
    layout: str
    """NCHW or NHWC: how a batch is laid out for the graph."""
    classes: tuple[str, ...]
    """Label of each logit, in order."""
    pixel_max: float
    """The dataset's pixel scale: a JSON grid's values lie in [0, pixel_max] (16 for load_digits),
    and an image's grey level g in 0..255 means the value pixel_max * g / 255."""
    native_size: tuple[int, int]
    """(height, width) of the dataset's images: the smallest grid or image accepted."""
    mean: tuple[float, ...]
    """Per channel, subtracted from value / pixel_max (in [0, 1]) before the graph."""
    std: tuple[float, ...]
    """Per channel, divides after the mean."""
    temperature: float = 1.0
    """Calibration temperature fitted on the validation split: softmax(logits / T)."""
    arch: str = "unknown"
    """The network's name, for the answer's model block and logs only (never branched on)."""
    features_name: str = "features"
    """The graph's second output, (batch, D): what the head (`head`) takes."""
    head: str = "head.npz"
    """The dropout → linear head over `features_name` (handlers/uncertainty.py's MLPHead format),
    relative to the artifact directory: sampled with fixed dropout masks for MC-dropout uncertainty."""

    def to_block(self) -> dict[str, Any]:
        block = {f.name: getattr(self, f.name) for f in fields(self)}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in block.items()}

    @classmethod
    def from_block(cls, block: dict, model: str = "image") -> ImageExport:
        reject_unknown_export(block, (f.name for f in fields(cls)), model)
        where = "manifest handler block"
        shape = require(block, "input_shape", where)
        if not isinstance(shape, list | tuple) or len(shape) != 3:
            raise ArchiveError(
                f"manifest input_shape must be [channels, height, width], not {shape!r}"
            )
        c, h, w = (positive_int(v, "manifest input_shape") for v in shape)
        if c not in CHANNELS:
            raise ArchiveError(f"manifest input_shape has {c} channels; served: {CHANNELS}")
        layout = text(require(block, "layout", where), "manifest layout")
        if layout not in LAYOUTS:
            raise ArchiveError(f"manifest layout must be one of {LAYOUTS}, not {layout!r}")
        native = require(block, "native_size", where)
        if not isinstance(native, list | tuple) or len(native) != 2:
            raise ArchiveError(f"manifest native_size must be [height, width], not {native!r}")
        (pixel_max,) = _numbers([require(block, "pixel_max", where)], "manifest pixel_max")
        std = _numbers(require(block, "std", where), "manifest std", c)
        (temperature,) = _numbers([block.get("temperature", 1.0)], "manifest temperature")
        if pixel_max <= 0 or min(std) <= 0 or temperature <= 0:
            raise ArchiveError("manifest pixel_max, std and temperature must be positive")
        classes = names(require(block, "classes", where), "manifest classes")
        if len(set(classes)) != len(classes):
            raise ArchiveError(f"manifest classes repeat a label: {list(classes)}")
        return cls(
            input_name=text(require(block, "input_name", where), "manifest input_name"),
            output_name=text(require(block, "output_name", where), "manifest output_name"),
            input_shape=(c, h, w),
            layout=layout,
            classes=classes,
            pixel_max=pixel_max,
            native_size=(
                positive_int(native[0], "manifest native_size"),
                positive_int(native[1], "manifest native_size"),
            ),
            mean=_numbers(require(block, "mean", where), "manifest mean", c),
            std=std,
            temperature=temperature,
            arch=text(block.get("arch", cls.arch), "manifest arch"),
            features_name=text(
                block.get("features_name", cls.features_name), "manifest features_name"
            ),
            head=text(block.get("head", cls.head), "manifest head"),
        )


class ImageSettings(ServingSettings):
    """The model-config's `handler:` block: how to serve the export (the knobs every model has
    are handlers/settings.py's), bound at load to the export (`load`). These defaults are the
    only ones; the model-config overrides them."""

    max_image_bytes: PositiveInt = 1 << 20
    """Largest encoded image (PNG/JPEG/WebP bytes, or its base64 in JSON) accepted."""
    max_image_pixels: PositiveInt = 4_000_000
    """Largest image, width x height, checked from the header before any pixel is decoded. A
    digits network reads 8 x 8 (its ResNet-shaped export 16 x 16): a 2000 x 2000 scan or a photo
    is already averaged over 250 x 250 pixels per input pixel, so nothing larger is needed. It is
    the most ever held at full size (images are decoded one at a time and shrunk at once)."""
    max_request_pixels: PositiveInt = 16_000_000
    """Pixels one request may make the worker decode, all its images together, read from the
    headers before decoding: past it 400 too_large. 64 images of 500 x 500 or 4 at
    max_image_pixels (docs/reliability.md, "Work priced before it is done")."""
    max_grid_side: PositiveInt = 64
    """Longest side of a JSON grid of numbers."""
    max_images: PositiveInt = 64
    """Images per request ({"images": [...]})."""
    max_batch_images: PositiveInt = 256
    """Work per batch, images: past it a request gets 503 + Retry-After (handlers/budget.py)."""
    max_batch_decoded_bytes: PositiveInt = 64 << 20
    """The worker's decoding guard: bytes a batch's images decode into (width x height x 1 for
    grey and palette images, x 4 for colour), priced from the headers; requests past it get 503 +
    Retry-After before anything is decoded (the first request of a batch always runs: it is within
    max_request_pixels). 64 MiB: one largest colour request (16,000,000 x 4 bytes) or four grey
    ones, so a small request waits behind at most that much decoding."""
    self_check_atol: Annotated[float, Field(gt=0)] = 1e-3
    """At load, the head over the graph's features must reproduce the graph's logits within this."""
    explain_method: Literal["ablation", "shapley"] = "ablation"
    """Captum method of /explanations: leave-one-pixel-out (the default, docs/explanations.md) or
    Shapley sampling."""
    explain_samples: PositiveInt = 8
    """Shapley sampling only: permutations drawn (each costs one pass per input pixel)."""
    max_explain_passes: PositiveInt = 8192
    """Cost limit of one explanation request, image-passes: past it 400 too_large."""
    max_batch_explain_passes: PositiveInt = 8192
    """Explanation work per batch, image-passes: requests past it get 503 + Retry-After."""

    @property
    def export(self) -> ImageExport:
        """What the export is (the manifest's `handler` block), bound at load."""
        return self._export

    @classmethod
    def load(cls, manifest: dict, config: dict | None, model: str) -> Self:
        """manifest.json contents + the model-config's `handler:` block → settings, or
        ArchiveError naming what is wrong."""
        export = ImageExport.from_block(handler_block(manifest), model)
        settings = cls.parse(config, model).bind(export, manifest_version(manifest))
        if settings.max_grid_side < max(export.native_size):
            raise ArchiveError(
                f"handler.max_grid_side {settings.max_grid_side} is below the native size "
                f"{list(export.native_size)}"
            )
        return settings
