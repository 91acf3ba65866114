"""The image kit's safe decoding: wire format → `PendingImages` (image files read from their
headers, checked and priced, not decoded) → `ImageRequest` (grey images at the size the pixel
reading works at).

Accepted bodies (docs/digits.md, for every model of the image kit):
- an image file: `image/png`, `image/jpeg` or `image/webp` (also sniffed from its signature when the
  content type says nothing: gRPC, application/octet-stream), colour or grey, of any size from the
  dataset's native size up to `max_image_pixels`; resized down by area;
- JSON `{"image": ...}` or `{"images": [...]}`, where each image is a grid (rows of numbers in
  0..pixel_max, 16 for load_digits) or the base64 of an image file.

Images are an attack surface, so the order matters: bytes are bounded before decoding, the header's
width x height before any pixel is decoded (a small PNG can claim 100,000 x 100,000), the format and
mode from the header too (no GIF, no CMYK or 16-bit), and animated files are refused. Every image of
a request is read that way first and the request is priced from the headers (`read_request`:
pixels to decode in all, bytes decoded), so the server refuses what is over a limit or past the
batch's budget before decoding anything (a 210-byte WebP can claim 2000 x 2000 of one colour).
Only then are pixels decoded, one image at a time, a large one shrunk at once from its 8-bit grey to
the size the pixel reading works at (`reading.working_factor`, `_block_average`), and a truncated or
corrupt file is that request's 400, never a worker crash.
"""

from __future__ import annotations

import base64
import binascii
import io
import struct
import warnings
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from handlers import codec
from handlers.errors import BadEncoding, BadField, EmptyInput, TooLarge, UnsupportedMediaType
from handlers.kits.image.reading import block_mean, working_factor
from handlers.kits.image.settings import ImageSettings

if TYPE_CHECKING:
    from handlers.service import Request

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
    """Grey images, (H, W) float32 in [0, 1]: shrunk to the pixel reading's working size when the
    server decoded them (`PendingImages.decode(shrink=True)`), at their own size from
    `decode_request`."""
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


ONE_BYTE_MODES = frozenset({"1", "L", "P"})
"""Modes Pillow keeps in one byte per pixel; every other served mode takes four (RGB and LA too)."""

SHRINK_ROWS = 256
"""About this many rows of a large image (a whole number of blocks) are converted to floating point
at a time by `_block_average`."""
# (JPEG's reduced DCT scales, `Image.draft`, and `Image.reduce` on 8-bit pixels would decode or
# shrink faster but round differently, enough to change answers: they are not used.)


@dataclass(frozen=True)
class EncodedImage:
    """An image file whose header has been read and checked: priced, not decoded."""

    data: bytes
    fmt: str
    """The one Pillow decoder tried for it (FORMATS)."""
    width: int
    height: int
    """As the header says: what Pillow decodes."""
    mode: str

    @property
    def pixels(self) -> int:
        """Pixels decoded (one frame: animated files are refused)."""
        return self.width * self.height

    @property
    def decoded_bytes(self) -> int:
        """Bytes Pillow decodes into: 1 per pixel for grey and palette images, 4 otherwise."""
        return self.pixels * (1 if self.mode in ONE_BYTE_MODES else 4)


@dataclass(frozen=True)
class PendingImages:
    """A request read and priced, not decoded: the server admits it against the batch's budgets
    before a pixel is decoded (handlers/budget.py, the kit's model's `budgets`), then decodes it."""

    images: tuple[EncodedImage | np.ndarray, ...]
    """Image files (headers checked) and JSON grids (already numbers, at most max_grid_side)."""
    many: bool = False

    @property
    def pixels(self) -> int:
        """Pixels to decode in all (a grid counts its cells)."""
        return sum(i.pixels if isinstance(i, EncodedImage) else i.size for i in self.images)

    @property
    def decoded_bytes(self) -> int:
        """Bytes decoding writes (a grid: its float32 cells, already held)."""
        return sum(
            i.decoded_bytes if isinstance(i, EncodedImage) else i.nbytes for i in self.images
        )

    def decode(self, settings: ImageSettings, shrink: bool = False) -> ImageRequest:
        """One image at a time. With `shrink` (the server), each upload is brought at once to the
        size the pixel reading works at (`reading.working_factor`: block means of a whole factor),
        from its 8-bit pixels a few rows at a time, so one image's 8-bit pixels at most are held
        at full size and no full-size float copy is made; without, each image at its own size."""
        return ImageRequest(tuple(_decoded(i, settings, shrink) for i in self.images), self.many)


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


def _open(data: bytes, fmt: str, settings: ImageSettings) -> Image.Image:
    """The header only: Pillow reads no pixel data before `load`."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(io.BytesIO(data), formats=[fmt])
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        raise TooLarge(f"the image is larger than {settings.max_image_pixels} pixels") from None
    except UnidentifiedImageError:
        raise BadEncoding(f"the body is not a readable {fmt} image") from None
    except _DECODE_ERRORS:
        raise BadEncoding(f"the {fmt} header is corrupt") from None


def read_image(data: bytes, fmt: str, settings: ImageSettings) -> EncodedImage:
    """Encoded bytes of one Pillow format → the checked, priced image, or a RequestError saying
    what is wrong. Only the header is read."""
    if not data:
        raise EmptyInput("the image is empty")
    if len(data) > settings.max_image_bytes:
        raise TooLarge(f"the image has {len(data)} bytes; the limit is {settings.max_image_bytes}")
    im = _open(data, fmt, settings)
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
    try:
        frames = getattr(im, "n_frames", 1)
    except _DECODE_ERRORS:
        raise BadEncoding(f"the {fmt} image is truncated or corrupt") from None
    if frames != 1:
        raise BadField("animated images are not served: send one frame")
    if im.mode not in MODES:
        raise UnsupportedMediaType(
            f"image mode {im.mode!r} is not served (CMYK, 16-bit and float images are not); "
            "send 8-bit grey or RGB"
        )
    return EncodedImage(data, fmt, width, height, im.mode)


def _decoded(image: EncodedImage | np.ndarray, settings: ImageSettings, shrink: bool) -> np.ndarray:
    if isinstance(image, np.ndarray):
        return image  # a JSON grid: at most max_grid_side, already numbers
    im = _open(image.data, image.fmt, settings)
    try:
        im.load()
        upright = ImageOps.exif_transpose(im)  # a phone photo's rotation is in its EXIF
        native = settings.export.native_size
        k = working_factor(upright.height, upright.width, native) if shrink else 1
        return _block_average(upright, k)
    except _DECODE_ERRORS:
        raise BadEncoding(f"the {image.fmt} image is truncated or corrupt") from None


def _has_alpha(im: Image.Image) -> bool:
    return "A" in im.mode or "a" in im.mode or "transparency" in im.info


def _block_average(im: Image.Image, k: int) -> np.ndarray:
    """Grey level in [0, 1], transparent pixels counting as background (dark), shrunk by `block_mean`
    of a whole factor k (1: at full size) without a full-size float copy: the grey (and alpha)
    stay 8-bit, and bands of whole blocks (a multiple of k rows, about SHRINK_ROWS) are made grey
    and averaged one at a time. Each block's mean depends on its own pixels only, so the bands'
    rows are the full image's rows: the reading downstream (its thresholds, the strokes' masks)
    sees the very numbers a full-size decode gives, and cannot decide a pixel differently."""
    alpha = None
    if _has_alpha(im):
        rgba = im.convert("RGBA")
        grey, alpha = np.asarray(rgba.convert("L")), np.asarray(rgba.getchannel("A"))
        del rgba
    else:
        grey = np.asarray(im.convert("L"))
    band = k * max(1, SHRINK_ROWS // k)
    parts = []
    for top in range(0, im.height, band):
        part = np.asarray(grey[top : top + band], dtype=np.float32) / 255.0
        if alpha is not None:
            part = part * (np.asarray(alpha[top : top + band], dtype=np.float32) / 255.0)
        parts.append(block_mean(part, k))
    return np.concatenate(parts, axis=0)


def decode_grid(value: list, settings: ImageSettings, where: str) -> np.ndarray:
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


def _base64_image(value: str | bytes, settings: ImageSettings, where: str) -> EncodedImage:
    """A base64 image, or (read from a tensor) its bytes, checked as their base64 would be."""
    size = len(value) if isinstance(value, str) else (len(value) + 2) // 3 * 4
    if size > (settings.max_image_bytes + 2) // 3 * 4 + 4:
        raise TooLarge(f"{where} is longer than the base64 of {settings.max_image_bytes} bytes")
    try:
        data = value if isinstance(value, bytes) else base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise BadEncoding(f"{where} is not a grid of numbers nor valid base64") from None
    fmt = _sniffed_format(data)
    if fmt is None:
        raise UnsupportedMediaType(f"{where} is not a PNG, JPEG or WebP image")
    return read_image(data, fmt, settings)


def _json_image(value: Any, settings: ImageSettings, where: str) -> EncodedImage | np.ndarray:
    if isinstance(value, str | bytes):
        return _base64_image(value, settings, where)
    if isinstance(value, list):
        return decode_grid(value, settings, where)
    raise BadField(f"{where} must be a grid (rows of numbers) or a base64 image")


def _from_json(body: Any, settings: ImageSettings) -> PendingImages:
    if not isinstance(body, dict) or ("image" in body) == ("images" in body):
        raise BadField('the JSON body must be an object with "image" or "images" (one of them)')
    if "image" in body:
        return PendingImages((_json_image(body["image"], settings, "'image'"),))
    return _images(body["images"], settings)


@dataclass(frozen=True)
class ImageInput:
    """A request read from tensors (the kit's tensor form, handlers/kits/image/oip.py): image files'
    bytes or grids (rows of numbers), not yet checked: `checked` reads them as the
    {"images": [...]} body holding their base64 and rows, with the same checks and messages."""

    images: tuple[bytes | list, ...]

    def checked(self, settings: ImageSettings) -> PendingImages:
        return _priced(_images(list(self.images), settings), settings)


def count_images(n: int, settings: ImageSettings) -> None:
    if n > settings.max_images:
        raise TooLarge(f"'images' has {n} images; the limit is {settings.max_images}")


def _images(images: Any, settings: ImageSettings) -> PendingImages:
    if not isinstance(images, list) or not images:
        raise BadField("'images' must be a non-empty list")
    count_images(len(images), settings)
    return PendingImages(
        tuple(_json_image(v, settings, f"'images'[{i}]") for i, v in enumerate(images)), many=True
    )


def _priced(request: PendingImages, settings: ImageSettings) -> PendingImages:
    if request.pixels > settings.max_request_pixels:
        raise TooLarge(
            f"the request's images are {request.pixels} pixels to decode in all; the limit is "
            f"{settings.max_request_pixels} (send fewer or smaller images)"
        )
    return request


def read_request(request: Request, settings: ImageSettings) -> PendingImages:
    """One request → its images read from their headers, checked and priced (nothing decoded), or
    a RequestError: over `max_request_pixels` in all is 400 too_large here."""
    if isinstance(request.typed, ImageInput):
        return request.typed.checked(settings)
    value, kind = codec.request_body(request, binary_types=IMAGE_TYPES)
    if isinstance(value, bytes | bytearray):
        data = bytes(value)
        fmt = FORMATS.get(kind) or (_sniffed_format(data) if kind in codec.SNIFFED_TYPES else None)
        if fmt is not None:
            return _priced(PendingImages((read_image(data, fmt, settings),)), settings)
    if kind.startswith("image/"):
        raise UnsupportedMediaType(f"{kind} is not served; send {', '.join(IMAGE_TYPES)}")
    payload = codec.decode(value, kind)
    body = codec.parse_json(payload.value) if payload.kind == "text" else payload.value
    return _priced(_from_json(body, settings), settings)


def decode_request(request: Request, settings: ImageSettings) -> ImageRequest:
    """One request → a validated ImageRequest with every image at its own size (tools
    and tests; the server reads with `read_request` and decodes what its budgets admit, shrunk
    to the pixel reading's working size), or a RequestError."""
    return read_request(request, settings).decode(settings)
