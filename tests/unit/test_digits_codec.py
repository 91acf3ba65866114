"""The digits wire contract without a model: JSON grids and image files become grey images, and
every hostile or broken input (decompression bombs, truncated and corrupt files, animations, CMYK
and 16-bit modes, text sent as a PNG, NaN, ragged rows, wrong shapes) is its own clear 4xx."""

from __future__ import annotations

import base64
import io
import json
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from handlers.base import request_from_row
from handlers.digits.settings import parse_settings
from handlers.errors import ArchiveError, RequestError
from handlers.kits.image.decode import decode_request
from handlers.kits.image.reading import graph_batch, graph_input, resize
from handlers.kits.image.settings import ImageExport

EXPORT = ImageExport(
    input_name="image", output_name="logits", input_shape=(1, 8, 8), layout="NCHW",
    classes=tuple("0123456789"), pixel_max=16.0, native_size=(8, 8), mean=(0.3,), std=(0.4,),
)  # fmt: skip
MANIFEST = {"version": "test", "handler": EXPORT.to_block()}
SETTINGS = parse_settings(MANIFEST, {"max_image_pixels": 1_000_000, "max_image_bytes": 200_000})
GRID = [[(r * 8 + c) % 17 for c in range(8)] for r in range(8)]


def decode(body, content_type="application/json", **headers):
    """As TorchServe hands a request over: JSON already parsed, any other body as bytes."""
    if content_type == "application/json" and not isinstance(body, bytes | str):
        body = json.loads(json.dumps(body))
    return decode_request(
        request_from_row({"body": body}, {"body": {"content-type": content_type}} | headers),
        SETTINGS,
    )


def refused(body, content_type="application/json", **headers) -> RequestError:
    with pytest.raises(RequestError) as info:
        decode(body, content_type, **headers)
    return info.value


def png(im: Image.Image, **save) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG", **save)
    return buf.getvalue()


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_claiming(width: int, height: int) -> bytes:
    """A few kB whose header claims width x height 8-bit grey pixels: a decompression
    bomb (its IDAT is the start of a stream of zero rows, which zlib compresses ~1000:1)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (width + 1) * 8, 9)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def digit_image(size: int = 32, mode: str = "L") -> Image.Image:
    im = Image.new("L", (size, size), 0)
    im.paste(255, (size // 4, size // 8, size // 2, size - size // 8))  # a bright "1"
    return im.convert(mode)


def test_json_grid_becomes_grey_in_0_1():
    req = decode({"image": GRID})
    assert not req.many and len(req.images) == 1
    np.testing.assert_allclose(req.images[0], np.array(GRID) / 16, rtol=1e-6)


def test_images_list_answers_a_list():
    req = decode({"images": [GRID, GRID, GRID]})
    assert req.many and len(req.images) == 3


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        ({"image": [row[:] for row in GRID[:7]]}, "bad_field"),  # 7 rows: below the native 8x8
        ({"image": [[0] * 65] * 65}, "bad_field"),  # over max_grid_side
        ({"image": GRID[:7] + [GRID[7][:5]]}, "bad_field"),  # ragged
        ({"image": [[[0]] * 8] * 8}, "bad_field"),  # a 3-d array
        ({"image": [[17] * 8] * 8}, "bad_field"),  # out of 0..16
        ({"image": [[-1] * 8] * 8}, "bad_field"),
        ({"image": [[True] * 8] * 8}, "bad_field"),
        ({"image": [["1"] * 8] * 8}, "bad_field"),
        ({"image": [[10**400] * 8] * 8}, "bad_field"),
        ({"image": 5}, "bad_field"),
        ({"image": []}, "bad_field"),
        ({"images": []}, "bad_field"),
        ({"images": [GRID] * 65}, "too_large"),
        ({"image": GRID, "images": [GRID]}, "bad_field"),
        ({"picture": GRID}, "bad_field"),
        ([GRID], "bad_field"),
        ({"image": "%%% not base64"}, "bad_encoding"),
        ({"image": base64.b64encode(b"GIF89a....").decode()}, "unsupported_media_type"),
    ],
)
def test_bad_json_is_refused_with_its_kind(body, kind):
    err = refused(body)
    assert err.kind == kind and err.status < 500, err.reason


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_numbers_are_refused(value):
    # Python's json (TorchServe's worker parses JSON bodies with it) reads NaN and Infinity.
    grid = [row[:] for row in GRID]
    grid[3][3] = value
    body = json.dumps({"image": grid}).encode()
    err = refused(body, "text/plain")
    assert err.kind == "bad_field" and "NaN" in err.reason


def test_bad_json_text_is_bad_encoding():
    assert refused(b"{not json", "application/json; charset=utf-8").kind == "bad_encoding"


@pytest.mark.parametrize("mode", ["L", "RGB", "RGBA", "P", "LA", "1"])
def test_png_in_every_8_bit_mode_decodes_to_the_same_grey(mode):
    grey = decode(png(digit_image(mode=mode)), "image/png").images[0]
    want = np.asarray(digit_image(), np.float32) / 255
    np.testing.assert_allclose(grey, want, atol=0.01)


def test_transparent_pixels_are_background():
    im = Image.new("RGBA", (8, 8), (255, 255, 255, 0))  # white but fully transparent
    assert decode(png(im), "image/png").images[0].max() == 0


def test_jpeg_webp_base64_and_sniffed_bodies_decode():
    for fmt, ctype in (("JPEG", "image/jpeg"), ("WEBP", "image/webp")):
        buf = io.BytesIO()
        digit_image().save(buf, fmt, quality=95)
        assert decode(buf.getvalue(), ctype).images[0].shape == (32, 32)
    data = png(digit_image())
    assert decode({"image": base64.b64encode(data).decode()}).images[0].shape == (32, 32)
    # gRPC and application/octet-stream say nothing: the PNG signature decides
    assert decode(data, "application/octet-stream").images[0].shape == (32, 32)
    assert decode(data, "").images[0].shape == (32, 32)


def test_exif_rotation_is_applied():
    im = digit_image()
    exif = Image.Exif()
    exif[0x0112] = 3  # rotated 180 degrees
    grey = decode(png(im, exif=exif), "image/png").images[0]
    want = np.asarray(im.rotate(180), np.float32) / 255
    np.testing.assert_allclose(grey, want, atol=0.01)


def test_png_decompression_bomb_is_refused_from_its_header():
    bomb = png_claiming(100_000, 100_000)
    assert len(bomb) < 4_000  # 10 billion pixels claimed by under 4 kB
    err = refused(bomb, "image/png")
    assert (err.kind, err.status) == ("too_large", 400)
    # under Pillow's own bomb limit but over the handler's: refused before a pixel is decoded
    err = refused(png_claiming(2_000, 2_000), "image/png")
    assert err.kind == "too_large" and "2000 x 2000" in err.reason
    # the same bomb inside JSON as base64
    assert refused({"image": base64.b64encode(bomb).decode()}).kind == "too_large"


def test_bytes_over_the_limit_are_refused_before_decoding():
    err = refused(b"\x89PNG\r\n\x1a\n" + b"\x00" * 200_001, "image/png")
    assert err.kind == "too_large"
    assert refused({"image": "A" * 300_000}).kind == "too_large"


def test_truncated_and_corrupt_images_are_bad_encoding():
    data = png(Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64), np.uint8)))
    assert refused(data[: len(data) // 2], "image/png").kind == "bad_encoding"
    corrupt = bytearray(data)
    corrupt[20] ^= 0xFF  # inside IHDR: its CRC no longer matches
    assert refused(bytes(corrupt), "image/png").kind == "bad_encoding"
    assert refused(data[:30], "image/png").kind == "bad_encoding"


def test_a_text_file_sent_as_png_is_bad_encoding():
    err = refused(b"hello, I am not a picture\n", "image/png")
    assert err.kind == "bad_encoding" and "PNG" in err.reason


def test_empty_and_tiny_images_are_refused():
    assert refused(b"", "image/png").kind == "empty_input"
    assert refused(png(Image.new("L", (7, 20))), "image/png").kind == "bad_field"


def test_animated_images_are_refused():
    frames = [digit_image(), digit_image().rotate(90)]
    buf = io.BytesIO()
    frames[0].save(buf, "PNG", save_all=True, append_images=frames[1:])
    assert "animated" in refused(buf.getvalue(), "image/png").reason
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:])
    assert refused(gif.getvalue(), "image/gif").status == 415


def test_cmyk_and_16_bit_images_are_unsupported():
    buf = io.BytesIO()
    digit_image(mode="CMYK").save(buf, "JPEG")
    assert refused(buf.getvalue(), "image/jpeg").status == 415
    sixteen = Image.fromarray(np.full((16, 16), 40000, np.uint16))
    assert refused(png(sixteen), "image/png").status == 415


def test_compressed_bodies_are_refused():
    err = refused(zlib.compress(b"{}"), "application/json", **{"content-encoding": "gzip"})
    assert err.status == 415


def test_resize_shrinks_by_area_and_grows_bilinear():
    grey = np.random.default_rng(1).uniform(0, 1, (8, 8)).astype(np.float32)
    big = np.kron(grey, np.ones((4, 4), np.float32))
    np.testing.assert_allclose(resize(big, 8, 8), grey, atol=1e-6)
    assert resize(grey, 16, 16).shape == (16, 16)


def test_graph_input_follows_the_manifest_shape_layout_and_normalisation():
    # A read image (pixels.read: polarity, levels, framing) is laid out and normalised as the
    # manifest says; a uniform image would read as blank, so the read image is given directly.
    grey = np.full((8, 8), 0.7, np.float32)
    x = graph_input(grey, EXPORT)
    assert x.shape == (1, 8, 8)
    np.testing.assert_allclose(x, (0.7 - 0.3) / 0.4, rtol=1e-6)
    rgb = ImageExport(**(EXPORT.__dict__ | {"input_shape": (3, 16, 16), "layout": "NHWC",
                                            "mean": (0, 0, 0), "std": (1, 1, 1)}))  # fmt: skip
    batch = graph_batch([grey, grey], rgb)
    assert batch.shape == (2, 16, 16, 3)
    np.testing.assert_allclose(batch, 0.7, rtol=1e-6)


def test_unknown_serving_keys_and_bad_manifests_fail_the_load():
    with pytest.raises(ArchiveError, match="max_pixels"):
        parse_settings(MANIFEST, {"max_pixels": 5})
    for key, value in (("layout", "CHW"), ("input_shape", [2, 8, 8]), ("std", [0.0]),
                       ("classes", ["1", "1"]), ("extra", 1)):  # fmt: skip
        with pytest.raises(ArchiveError):
            parse_settings({"handler": EXPORT.to_block() | {key: value}}, None)


@pytest.mark.parametrize("fmt", ["GIF", "TIFF", "BMP", "JPEG2000"])
@pytest.mark.parametrize("content_type", ["application/octet-stream", ""])
def test_an_unserved_image_format_sent_without_its_type_is_a_415_naming_it(fmt, content_type):
    """Sniffed where the content type says nothing (gRPC, octet-stream): these fell through to
    JSON and got 400 "the body is not valid UTF-8" where docs/digits.md promises a 415."""
    buf = io.BytesIO()
    digit_image().save(buf, fmt)
    err = refused(buf.getvalue(), content_type)
    assert (err.status, err.kind) == (415, "unsupported_media_type"), err.reason
    assert fmt.replace("2000", " 2000") in err.reason


def test_text_that_starts_like_an_image_signature_is_still_read_as_a_body():
    assert refused(b"BMW grids", "application/octet-stream").kind == "bad_encoding"
