"""Wire format → `ImageRequest` (grey images, each bounded and checked before it costs anything).

Accepted bodies (docs/digits.md):
- an image file: `image/png`, `image/jpeg` or `image/webp` (also sniffed from its signature when the
  content type says nothing: gRPC, application/octet-stream), colour or grey, of any size from the
  dataset's native size up to `max_image_pixels`; resized down by area;
- JSON `{"image": ...}` or `{"images": [...]}`, where each image is a grid (rows of numbers in
  0..pixel_max, 16 for load_digits) or the base64 of an image file.

Images are an attack surface, so the order matters: bytes are bounded before decoding, the header's
width x height before any pixel is decoded (a small PNG can claim 100,000 x 100,000), the format and
mode from the header too (no GIF, no CMYK or 16-bit), and animated files are refused; only then are
pixels decoded, and a truncated or corrupt file is that request's 400, never a worker crash.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct
import warnings
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from handlers import codec
from handlers.digits.settings import DigitsSettings
from handlers.errors import BadEncoding, BadField, EmptyInput, TooLarge, UnsupportedMediaType

FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP"}
"""Media type → the only Pillow decoder tried for it."""
IMAGE_TYPES = tuple(FORMATS)
SIGNATURES = {b"\x89PNG\r\n\x1a\n": "PNG", b"\xff\xd8\xff": "JPEG"}
"""File signatures sniffed where the content type says nothing (WebP: RIFF....WEBP, below)."""
MODES = frozenset({"1", "L", "P", "RGB", "RGBA", "LA", "La", "RGBa", "PA"})
"""8-bit grey and colour, with or without alpha; CMYK, 16-bit and float images are refused."""
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, zlib.error, struct.error)
"""What Pillow's decoders raise on hostile or broken bytes (truncated data, bad chunk lengths,
oversized text chunks): each is the request's 400, never a worker crash."""


@dataclass(frozen=True)
class ImageRequest:
    images: tuple[np.ndarray, ...]
    """Grey images, (H, W) float32 in [0, 1] at their own size (pixels.py resizes them)."""
    many: bool = False
    """Sent as {"images": [...]}: answered with a list."""


UNSERVED_SIGNATURES = {
    b"GIF87a": "GIF",
    b"GIF89a": "GIF",
    b"II*\x00": "TIFF",
    b"MM\x00*": "TIFF",
    b"\x00\x00\x00\x0cjP  \r\n\x87\n": "JPEG 2000",
}
"""Image files recognised only to be refused (415, naming the format) where the content type says
nothing: otherwise they fall through to JSON and get "not valid UTF-8"."""


def _sniffed_format(data: bytes) -> str | None:
    """The served format the bytes' signature names, None for no image signature, 415 for an
    image format that is not served."""
    for magic, fmt in SIGNATURES.items():
        if data.startswith(magic):
            return fmt
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "WEBP"
    unserved = next((f for m, f in UNSERVED_SIGNATURES.items() if data.startswith(m)), None)
    if unserved is None and data[:2] == b"BM" and data[6:10] == b"\0\0\0\0":
        unserved = "BMP"  # "BM", the file size, then four reserved zero bytes
    if unserved is not None:
        raise UnsupportedMediaType(f"{unserved} images are not served; send PNG, JPEG or WebP")
    return None


def decode_image(data: bytes, fmt: str, settings: DigitsSettings) -> np.ndarray:
    """Encoded bytes of one Pillow format → a grey image, or a RequestError saying what is wrong."""
    if not data:
        raise EmptyInput("the image is empty")
    if len(data) > settings.max_image_bytes:
        raise TooLarge(f"the image has {len(data)} bytes; the limit is {settings.max_image_bytes}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            im = Image.open(io.BytesIO(data), formats=[fmt])  # reads the header only
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise TooLarge(f"the image is larger than {settings.max_image_pixels} pixels") from None
    except UnidentifiedImageError:
        raise BadEncoding(f"the body is not a readable {fmt} image") from None
    except _DECODE_ERRORS:
        raise BadEncoding(f"the {fmt} header is corrupt") from None
    width, height = im.size
    if width * height > settings.max_image_pixels:
        raise TooLarge(
            f"the image is {width} x {height} pixels; the limit is {settings.max_image_pixels}"
        )
    native_h, native_w = settings.export.native_size
    if width < native_w or height < native_h:
        raise BadField(
            f"the image is {width} x {height}; the smallest served is {native_w} x {native_h}"
        )
    if getattr(im, "n_frames", 1) != 1:
        raise BadField("animated images are not served: send one frame")
    if im.mode not in MODES:
        raise UnsupportedMediaType(
            f"image mode {im.mode!r} is not served (CMYK, 16-bit and float images are not); "
            "send 8-bit grey or RGB"
        )
    try:
        im.load()
        upright = ImageOps.exif_transpose(im)  # a phone photo's rotation is in its EXIF
        return _grey(upright)
    except _DECODE_ERRORS:
        raise BadEncoding(f"the {fmt} image is truncated or corrupt") from None


def _grey(im: Image.Image) -> np.ndarray:
    """Grey level in [0, 1]; transparent pixels count as background (dark)."""
    if "A" in im.mode or "a" in im.mode or "transparency" in im.info:
        rgba = im.convert("RGBA")
        alpha = np.asarray(rgba.getchannel("A"), dtype=np.float32) / 255.0
        return np.asarray(rgba.convert("L"), dtype=np.float32) / 255.0 * alpha
    return np.asarray(im.convert("L"), dtype=np.float32) / 255.0


def decode_grid(value: list, settings: DigitsSettings, where: str) -> np.ndarray:
    """Rows of numbers in [0, pixel_max] → a grey image."""
    export = settings.export
    native_h, native_w = export.native_size
    limit = settings.max_grid_side
    if not value or not all(isinstance(row, list) for row in value):
        raise BadField(f"{where} must be a list of rows of numbers")
    height, width = len(value), len(value[0])
    if any(len(row) != width for row in value):
        raise BadField(f"{where} has rows of different lengths")
    if not (native_h <= height <= limit and native_w <= width <= limit):
        raise BadField(
            f"{where} is {height} x {width}; rows x columns must each lie in "
            f"[{native_h}, {limit}] x [{native_w}, {limit}]"
        )
    flat = [v for row in value for v in row]
    # Parsed JSON holds only these types; true/false is a client bug, not 1/0.
    if not set(map(type, flat)) <= {float, int}:
        raise BadField(f"{where} must contain only numbers")
    try:
        grid = np.asarray(flat, dtype=np.float64).reshape(height, width)
    except OverflowError:  # an integer literal beyond any float (10**400)
        raise BadField(f"{where} has values out of range") from None
    if not np.isfinite(grid).all():
        raise BadField(f"{where} contains NaN or infinite values")
    if grid.min() < 0 or grid.max() > export.pixel_max:
        raise BadField(f"{where} has values outside [0, {export.pixel_max:g}]")
    return (grid / export.pixel_max).astype(np.float32)


def _base64_image(value: str, settings: DigitsSettings, where: str) -> np.ndarray:
    if len(value) > (settings.max_image_bytes + 2) // 3 * 4 + 4:
        raise TooLarge(f"{where} is longer than the base64 of {settings.max_image_bytes} bytes")
    try:
        data = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadEncoding(f"{where} is not a grid of numbers nor valid base64") from None
    fmt = _sniffed_format(data)
    if fmt is None:
        raise UnsupportedMediaType(f"{where} is not a PNG, JPEG or WebP image")
    return decode_image(data, fmt, settings)


def _json_image(value: Any, settings: DigitsSettings, where: str) -> np.ndarray:
    if isinstance(value, str):
        return _base64_image(value, settings, where)
    if isinstance(value, list):
        return decode_grid(value, settings, where)
    raise BadField(f"{where} must be a grid (rows of numbers) or a base64 image")


def _from_json(body: Any, settings: DigitsSettings) -> ImageRequest:
    if not isinstance(body, dict) or ("image" in body) == ("images" in body):
        raise BadField('the JSON body must be an object with "image" or "images" (one of them)')
    if "image" in body:
        return ImageRequest((_json_image(body["image"], settings, "'image'"),))
    images = body["images"]
    if not isinstance(images, list) or not images:
        raise BadField("'images' must be a non-empty list")
    if len(images) > settings.max_images:
        raise TooLarge(f"'images' has {len(images)} images; the limit is {settings.max_images}")
    return ImageRequest(
        tuple(_json_image(v, settings, f"'images'[{i}]") for i, v in enumerate(images)), many=True
    )


def decode_request(row: dict, headers: dict, settings: DigitsSettings) -> ImageRequest:
    """One TorchServe request → a validated ImageRequest, or a RequestError."""
    codec.reject_content_encoding(headers)
    param, value = codec.request_body(row)
    kind = codec.content_type_of(headers, param)
    if isinstance(value, bytes | bytearray):
        data = bytes(value)
        if kind in FORMATS:
            return ImageRequest((decode_image(data, FORMATS[kind], settings),))
        fmt = _sniffed_format(data) if kind in codec.SNIFFED_TYPES else None
        if fmt is not None:
            return ImageRequest((decode_image(data, fmt, settings),))
    if kind.startswith("image/"):
        raise UnsupportedMediaType(f"{kind} is not served; send {', '.join(IMAGE_TYPES)}")
    payload = codec.decode(value, kind)
    body = codec.parse_json(payload.value) if payload.kind == "text" else payload.value
    return _from_json(body, settings)
