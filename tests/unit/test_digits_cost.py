"""Digits work is priced before it is done: every image of a request is read from its header and
the request refused (400 over its own limit, 503 past the batch's budget) before a pixel is
decoded; what is admitted is decoded one image at a time straight to the size the pixel reading
works at (pixels.working_factor), and the answers are those a full-size decode gives."""

from __future__ import annotations

import base64
import io
import json
import time
import tracemalloc

import numpy as np
import pytest
from PIL import Image

from handlers import budget
from handlers.digits.model import DigitsModel
from handlers.digits.predict import DigitsPredictor
from handlers.digits.settings import parse_settings
from handlers.errors import TooLarge
from handlers.kits.image.classifier import ImageAnswer as DigitsAnswer
from handlers.kits.image.decode import (
    EncodedImage,
    PendingImages,
    decode_request,
    read_request,
)
from handlers.kits.image.reading import block_mean, working_factor
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config
from tests.unit.test_digits_codec import MANIFEST
from training.digits.data import load_splits

DEFAULTS = parse_settings(MANIFEST, handler_config("digits"))
"""The archive's own limits (model-config.yaml), an 8 x 8 network."""
JSON = {"Content-Type": "application/json"}


def encoded(im: Image.Image, fmt: str, **save) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **save)
    return buf.getvalue()


def one_colour_webp(side: int = 2000) -> bytes:
    """About 200 bytes claiming side x side RGB pixels: lossless WebP of one colour."""
    return encoded(Image.new("RGB", (side, side), (200, 200, 200)), "WEBP", lossless=True)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def read_json(body: dict, settings=DEFAULTS) -> PendingImages:
    return read_request(Request(json.loads(json.dumps(body)), JSON), settings)


def test_the_18_kb_request_of_64_one_colour_webps_is_refused_before_a_pixel_is_decoded():
    """64 x a 210-byte 2000 x 2000 WebP: decoding it whole took 1.4 GB and 4.7 s of a worker."""
    webp = one_colour_webp()
    assert len(webp) < 300
    body = {"images": [b64(webp)] * 64}
    assert len(json.dumps(body)) < 20_000
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(TooLarge) as info:
            decode_request(Request(json.loads(json.dumps(body)), JSON), DEFAULTS)
        seconds = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (info.value.status, info.value.kind) == (400, "too_large")
    reason = info.value.reason
    assert "256000000 pixels" in reason and str(DEFAULTS.max_request_pixels) in reason, reason
    # One full-size float32 image alone is 16 MB; reading 64 headers takes a fraction of that.
    assert peak < 4 << 20, f"{peak / 2**20:.1f} MB traced while refusing"
    assert seconds < 1.0, f"{seconds:.2f} s"


def test_the_most_a_request_may_cost_is_priced_from_headers_and_decoded_at_the_working_size():
    webp = one_colour_webp()
    pending = read_json({"images": [b64(webp)] * 4})
    assert pending.pixels == 4 * 2000 * 2000 == DEFAULTS.max_request_pixels
    assert pending.decoded_bytes == 4 * 2000 * 2000 * 4  # RGB: Pillow keeps 4 bytes per pixel
    assert all(isinstance(i, EncodedImage) and i.data == webp for i in pending.images)
    tracemalloc.start()
    try:
        decoded = pending.decode(DEFAULTS, shrink=True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    k = working_factor(2000, 2000, (8, 8))
    assert k == 31
    assert [g.shape for g in decoded.images] == [(65, 65)] * 4
    np.testing.assert_allclose(decoded.images[0], 200 / 255, atol=1e-6)
    # Pillow's WebP decoder hands over each frame as one 16 MB buffer: one image's at a time.
    one_image = pending.images[0].decoded_bytes
    assert peak < one_image + (4 << 20), f"{peak / 2**20:.1f} MB traced for 4 images decoded"
    # 64 pixels more than the limit are refused, naming the figure and the limit.
    with pytest.raises(TooLarge, match=r"16000064 pixels .* limit is 16000000"):
        read_json({"images": [b64(webp)] * 4 + [[[0] * 8] * 8]})


def held_out_images() -> list[Image.Image]:
    """The 297 held-out digits as 8-bit images, bright strokes on dark."""
    greys = load_splits()["test"].greys
    return [Image.fromarray((g * 255).round().astype(np.uint8)) for g in greys]


def model_inputs(data: bytes, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    """(full-size decode then the reading's block mean, the server's priced decode) of one file."""
    body = {"image": b64(data)}
    full = decode_request(Request(body, JSON), DEFAULTS).images[0]
    served = read_json(body).decode(DEFAULTS, shrink=True).images[0]
    k = working_factor(*full.shape, (8, 8))
    return (full if k == 1 else block_mean(full, k)), served


@pytest.mark.parametrize("side", [8, 32, 64, 127])
def test_ordinary_images_reach_the_model_exactly_as_a_full_size_decode(side):
    for im in held_out_images()[:60]:
        big = im.resize((side, side), Image.Resampling.NEAREST)
        for fmt, mode in (("PNG", "L"), ("PNG", "RGBA"), ("WEBP", "RGB")):
            save = {"lossless": True} if fmt == "WEBP" else {}
            full, served = model_inputs(encoded(big.convert(mode), fmt, **save), fmt)
            np.testing.assert_array_equal(served, full)


@pytest.mark.parametrize(
    ("size", "fmt", "mode"),
    [((512, 512), "PNG", "L"), ((2000, 1963), "PNG", "RGBA"), ((1001, 964), "WEBP", "RGB")],
)
def test_large_images_are_averaged_without_a_full_size_float_copy_to_the_same_input(
    size, fmt, mode
):
    assert working_factor(size[1], size[0], (8, 8)) > 1  # these take the large-image path
    for im in held_out_images()[:20]:
        big = im.resize(size, Image.Resampling.BILINEAR).convert(mode)
        if mode == "RGBA":  # a transparency ramp: transparent pixels read as background
            rgba = np.asarray(big).copy()
            rgba[..., 3] = np.linspace(0, 255, size[0]).astype(np.uint8)
            big = Image.fromarray(rgba)
        save = {"lossless": True} if fmt == "WEBP" else {}
        full, served = model_inputs(encoded(big, fmt, **save), fmt)
        np.testing.assert_array_equal(served, full)  # bit for bit: the reading's masks agree


@pytest.mark.parametrize("size", [(1024, 1024), (2000, 1963), (300, 263)])
def test_large_jpegs_reach_the_model_as_a_full_size_decode_gives_them(size):
    for im in held_out_images()[:20]:
        big = im.resize(size, Image.Resampling.BILINEAR).convert("RGB")
        full, served = model_inputs(encoded(big, "JPEG", quality=95), "JPEG")
        np.testing.assert_array_equal(served, full)


@pytest.fixture(scope="module")
def predictor(digits_artifacts):
    return DigitsPredictor.from_dir(digits_artifacts, handler_config("digits"))


def test_held_out_digits_get_the_same_answers_through_the_priced_path(predictor):
    """The old path (decode at full size, resize in classify) against the served one."""
    images = held_out_images()
    for side, fmt in ((8, "PNG"), (64, "PNG"), (512, "PNG"), (512, "JPEG"), (300, "JPEG")):
        files = [
            b64(
                encoded(
                    im.resize((side, side - 37 * (fmt == "JPEG")), Image.Resampling.BILINEAR),
                    fmt,
                    quality=95,
                )
            )
            for im in images
        ]
        for at in range(0, len(files), 32):  # 32 x 512 x 512 is within max_request_pixels
            body = {"images": files[at : at + 32]}
            old = predictor.classify(list(decode_request(Request(body, JSON), DEFAULTS).images))
            [new] = predictor.predict([read_json(body)])
            assert isinstance(new, DigitsAnswer)
            assert [c.label for c in new.predictions] == [c.label for c in old], (side, fmt)
            diff = max(
                abs(a.probabilities[k] - b.probabilities[k])
                for a, b in zip(new.predictions, old, strict=True)
                for k in a.probabilities
            )
            # The model's input is the same bit for bit at every size (the large-image path
            # averages bands of whole blocks exactly as the full-size reading does), so no
            # threshold of the reading (the strokes' masks) can decide a pixel differently.
            assert diff == 0.0, (side, fmt, diff)


def truncated_png() -> bytes:
    """A header that reads well and pixel data that does not: only decoding can tell."""
    noise = np.random.default_rng(0).integers(0, 255, (64, 64), np.uint8)
    data = encoded(Image.fromarray(noise), "PNG")
    return data[: len(data) // 2]


def budgets_of(predictor: DigitsPredictor) -> tuple:
    return DigitsModel(predictor).budgets


def test_the_decoding_guard_refuses_a_batchs_excess_before_decoding(predictor, digits_artifacts):
    webp = b64(one_colour_webp())
    biggest = read_json({"images": [webp] * 4})  # 64,000,000 bytes decoded: the guard's most
    broken = read_json({"image": b64(truncated_png())})  # 64 x 64 grey: 4,096 bytes
    small = read_json({"image": [[0] * 8] * 8})
    # The model declares its budgets; the lifecycle (handlers/service.py) applies them.
    answers = predictor.predict(
        budget.apply([biggest, broken, biggest, small], budgets_of(predictor))
    )
    assert isinstance(answers[0], DigitsAnswer) and isinstance(answers[3], DigitsAnswer)
    # The truncated file fits beside the first and is decoded: its own 400, found only then.
    assert (answers[1].status, answers[1].kind) == (400, "bad_encoding")
    assert (answers[2].status, answers[2].kind) == (503, "overloaded")
    assert "bytes of decoded images" in answers[2].reason
    assert answers[2].retry_after_s == 1
    # Past the guard the same file is refused without being decoded: 503, not its 400.
    tight = DigitsPredictor.from_dir(
        digits_artifacts, handler_config("digits") | {"max_batch_decoded_bytes": 4000}
    )
    first, past = tight.predict(budget.apply([small, broken], budgets_of(tight)))
    assert isinstance(first, DigitsAnswer)
    assert (past.status, past.kind) == (503, "overloaded"), past


def explain(body: dict) -> Request:
    return Request(json.loads(json.dumps(body)), JSON | {"explain": "True"}, "x")


def test_explanations_are_refused_before_their_images_are_decoded(digits_artifacts):
    one_pass = {"max_explain_passes": 100, "max_batch_explain_passes": 100}  # one image each
    service = ModelService.from_dir(digits_artifacts, config=handler_config("digits") | one_pass)
    broken = {"image": b64(truncated_png())}
    small = {"image": [[0] * 8] * 8}
    # Decoded, the file is a 400 (what reaching the decoder looks like) ...
    [alone] = service.handle_batch([explain(broken)])
    assert (alone.status, alone.kind) == (400, "bad_encoding")
    # ... past the batch's explanation budget it is a 503 without being decoded ...
    service.explain_share.spans.clear()
    first, second = service.handle_batch([explain(small), explain(broken)])
    assert first.content_type == "application/json", first
    assert (second.status, second.kind) == (503, "overloaded"), second
    # ... and once explanations have used their share of a worker that serves predictions, likewise.
    now = service.explain_share.clock()
    service.explain_share.record(now - service.explain_share.window_s, now)
    service.explain_share.record_predictions(now - service.explain_share.window_s, now)
    [refused] = service.handle_batch([explain(broken)])
    assert (refused.status, refused.kind) == (503, "overloaded")
    assert "share" in refused.reason
