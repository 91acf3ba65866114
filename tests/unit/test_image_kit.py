"""The image kit's bad-input and cost cases, written once and run over every registered model
built on the kit (its registry entry's `kits`): each model of the modality inherits them. A
model's tiny export comes from its session fixture `<name>_artifacts` (tests/fixtures/), its
limits from its own model-config.yaml; every request goes through the model's `ModelService`, as
served."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from handlers import registry
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config
from tests.support import wire

IMAGE_MODELS = [s.name for s in registry.MODELS if "image" in s.kits]
JSON = {"Content-Type": "application/json"}


def test_the_kit_has_models():
    assert "digits" in IMAGE_MODELS


@pytest.fixture(scope="module", params=IMAGE_MODELS)
def model(request) -> tuple[str, Path]:
    """(name, its tiny export)."""
    return request.param, request.getfixturevalue(f"{request.param}_artifacts")


def served(model: tuple[str, Path], **overrides: object) -> ModelService:
    """The model as its archive serves it (its model-config's limits), on one thread."""
    name, artifacts = model
    config = handler_config(name) | {"threads": 1} | overrides
    return ModelService.from_dir(artifacts, name=name, config=config)


@pytest.fixture(scope="module")
def service(model) -> ModelService:
    return served(model)


def encoded(im: Image.Image, fmt: str, **save) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **save)
    return buf.getvalue()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def as_request(body: object, headers: dict) -> Request:
    """A JSON body as the client's bytes; (bytes, content type) as an upload."""
    if isinstance(body, tuple):
        data, content_type = body
        return Request(data, headers | {"Content-Type": content_type})
    return Request(json.dumps(body).encode(), headers | JSON)


def ask(service: ModelService, *bodies: object, explain: bool = False) -> list:
    headers = {"explain": "True"} if explain else {}
    service.explain_share.spans.clear()  # explanations' share of the worker: never the limit here
    return service.handle_batch([as_request(b, headers) for b in bodies])


def native_grid(service: ModelService, value: float = 0.0) -> list:
    h, w = service.settings.export.native_size
    return [[value] * w for _ in range(h)]


def bad_cases(service: ModelService) -> list[tuple[str, object, int, str]]:
    """(name, request body or (bytes, content type), status, kind) from the model's own limits."""
    s = service.settings
    h, w = s.export.native_size
    noise = encoded(
        Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64), np.uint8)), "PNG"
    )
    frames = [Image.new("L", (w * 2, h * 2), c) for c in (0, 255)]
    anim = io.BytesIO()
    frames[0].save(anim, "PNG", save_all=True, append_images=frames[1:])
    side = int(s.max_image_pixels**0.5) + 1
    return [
        ("no image key", {"picture": native_grid(service)}, 400, "bad_field"),
        ("both keys", {"image": native_grid(service), "images": []}, 400, "bad_field"),
        ("empty list", {"images": []}, 400, "bad_field"),
        (
            "too many images",
            {"images": [native_grid(service)] * (s.max_images + 1)},
            400,
            "too_large",
        ),
        ("grid below native", {"image": [[0] * (w - 1)] * (h - 1)}, 400, "bad_field"),
        ("grid past max side", {"image": [[0] * (s.max_grid_side + 1)] * h}, 400, "bad_field"),
        ("ragged grid", {"image": [[0] * w] * (h - 1) + [[0] * (w - 1)]}, 400, "bad_field"),
        (
            "above pixel_max",
            {"image": native_grid(service, s.export.pixel_max + 1)},
            400,
            "bad_field",
        ),
        ("negative", {"image": native_grid(service, -1)}, 400, "bad_field"),
        ("booleans", {"image": [[True] * w] * h}, 400, "bad_field"),
        ("not base64", {"image": "not base64!"}, 400, "bad_encoding"),
        ("base64 of no image", {"image": b64(b"hello world")}, 415, "unsupported_media_type"),
        ("truncated png", (noise[: len(noise) // 2], "image/png"), 400, "bad_encoding"),
        ("empty png", (b"", "image/png"), 400, "empty_input"),
        (
            "below native png",
            (encoded(Image.new("L", (w - 1, h - 1)), "PNG"), "image/png"),
            400,
            "bad_field",
        ),
        ("animated", (anim.getvalue(), "image/png"), 400, "bad_field"),
        (
            "cmyk",
            (encoded(Image.new("CMYK", (w, h)), "JPEG"), "image/jpeg"),
            415,
            "unsupported_media_type",
        ),
        (
            "gif",
            (encoded(Image.new("L", (w, h)), "GIF"), "image/gif"),
            415,
            "unsupported_media_type",
        ),
        (
            "gif sniffed",
            (encoded(Image.new("L", (w, h)), "GIF"), "application/octet-stream"),
            415,
            "unsupported_media_type",
        ),
        (
            "bytes past the limit",
            (b"\x89PNG\r\n\x1a\n" + b"\0" * s.max_image_bytes, "image/png"),
            400,
            "too_large",
        ),
        (
            "pixels past the limit",
            (encoded(Image.new("L", (side, side)), "PNG"), "image/png"),
            400,
            "too_large",
        ),
    ]


def test_every_bad_input_is_a_clear_4xx_and_its_neighbours_are_answered(service):
    cases = bad_cases(service)
    for at in range(0, len(cases), 7):
        chunk = cases[at : at + 7]
        results = ask(service, {"image": native_grid(service)}, *(c[1] for c in chunk))
        assert results[0].content_type == "application/json", results[0]
        for (name, _, status, kind), got in zip(chunk, results[1:], strict=True):
            assert (getattr(got, "status", 200), getattr(got, "kind", None)) == (status, kind), (
                name,
                got,
            )
            assert got.reason and got.reason.isascii(), name


def one_colour_webp(side: int) -> str:
    return b64(encoded(Image.new("RGB", (side, side), (200, 200, 200)), "WEBP", lossless=True))


def test_the_worst_request_the_limits_allow_is_priced_from_headers_before_decoding(service):
    """Over max_request_pixels in all: 400 too_large, however small the bytes; within it, the
    batch's decoding guard turns the next such request into 503 + Retry-After."""
    s = service.settings
    side = int(s.max_image_pixels**0.5)
    per = s.max_request_pixels // (side * side)
    webp = one_colour_webp(side)
    [over] = ask(service, {"images": [webp] * min(per + 1, s.max_images)})
    if per + 1 <= s.max_images:
        assert (over.status, over.kind) == (400, "too_large"), over
        assert "pixels to decode" in over.reason
    worst = {"images": [webp] * min(per, s.max_images)}
    first, second, small = ask(service, worst, worst, {"image": native_grid(service)})
    assert first.content_type == "application/json", first
    assert (second.status, second.kind) == (503, "overloaded"), second
    assert second.retry_after_s and "bytes of decoded images" in second.reason
    assert small.content_type == "application/json", small


def test_images_past_the_batch_budget_get_503_and_the_first_always_runs(service):
    s = service.settings
    many = {"images": [native_grid(service)] * s.max_images}
    n = s.max_batch_images // s.max_images + 1
    results = ask(service, *([many] * (n + 1)))
    assert results[0].content_type == "application/json"
    refused = [r for r in results if getattr(r, "status", 200) == 503]
    assert refused and all(r.kind == "overloaded" and "images" in r.reason for r in refused)


def test_explanations_are_priced_per_request_and_per_batch(model, service):
    s = service.settings
    cost = service.model.explainer.cost()
    # Past the per-request limit (tightened to two images' worth): 400 before anything runs.
    tight = served(model, max_explain_passes=2 * cost)
    [big] = ask(tight, {"images": [native_grid(service)] * 3}, explain=True)
    assert (big.status, big.kind) == (400, "too_large"), big
    assert f"{3 * cost} image-passes" in big.reason
    fits = {
        "images": [native_grid(service)] * max(1, min(s.max_images, s.max_explain_passes // cost))
    }
    results = ask(service, fits, fits, explain=True)
    assert results[0].content_type == "application/json", results[0]
    if 2 * cost * len(fits["images"]) > s.max_batch_explain_passes:
        assert (results[1].status, results[1].kind) == (503, "overloaded"), results[1]


def test_more_images_than_the_limit_as_tensors_are_refused_from_their_shape(model, service):
    """Past `max_images`, both tensor forms are refused with the JSON body's message from the
    tensor's shape, before a grid becomes rows or a file's bytes are taken."""
    from handlers.errors import TooLarge

    name, _ = model
    oip = registry.get(name).spec().contract
    s = service.settings
    n = s.max_images + 1
    h, w = s.export.native_size

    class Unread(np.ndarray):
        def tolist(self):
            raise AssertionError("the grid was read before the count was checked")

    grids = np.zeros((n, h, w), np.float32).view(Unread)
    files = np.array([b"not read"] * n, dtype=object)
    for tensors in ({"grid": grids}, {"image": files}):
        with pytest.raises(TooLarge, match=f"has {n} images; the limit is {s.max_images}"):
            oip.request_of(tensors, {}, s)


def test_the_typed_forms_are_the_wires_and_an_oip_infer_does_no_json(model, service, monkeypatch):
    """The kit's typed request and answer (decode.ImageInput, classifier.ImageAnswer): the OIP
    contract path (tensors → typed request → the worker → tensors) gives the JSON answer's tensors
    to the bit, for encoded images and grids, its row is the JSON answer's value, and it parses
    and writes no JSON at all (no base64 either)."""
    from handlers.kits.image.classifier import ImageAnswer
    from handlers.kits.image.decode import ImageInput
    from oip.contract import Contract
    from tests.support.json_calls import json_calls

    name, _ = model
    s = service.settings
    contract = Contract(name, s)
    h, w = s.export.native_size
    grid = np.arange(h * w, dtype=np.float32).reshape(1, h, w) % (s.export.pixel_max + 1)
    digit = Image.fromarray((np.arange(40 * 30) % 256).astype(np.uint8).reshape(40, 30))
    files = [encoded(digit, "PNG"), encoded(digit.rotate(90, expand=True), "JPEG")]
    Item = type("Input", (), {})
    for inputs in (
        {"grid": ("FP32", grid)},
        {"image": ("BYTES", np.array(files, dtype=object))},
    ):
        arrays = {n: a for n, (_, a) in inputs.items()}
        [reply] = service.handle_batch([Request(**vars(wire.native(contract, arrays, {})))])
        want = wire.answer(contract, reply, False)
        items = []
        for n, (datatype, a) in inputs.items():
            item = Item()
            item.name, item.datatype, item.shape, item.data = n, datatype, list(a.shape), a.tolist()
            items.append(item)
        with json_calls(monkeypatch) as calls, monkeypatch.context() as patch:
            patch.setattr(base64, "b64decode", None)  # never called on the typed path
            patch.setattr(base64, "b64encode", None)
            request = contract.request(contract.read_inputs(items), {}, "r", False)
            [outputs] = service.handle_batch([request], contract.write)
        assert not calls, calls
        assert request.body is None and isinstance(request.typed, ImageInput)
        assert [o.name for o in outputs] == [o.name for o in want]
        for got, expected in zip(outputs, want, strict=True):
            assert got.datatype == expected.datatype, got.name
            if got.data.dtype == object:
                assert got.data.tolist() == expected.data.tolist(), got.name
            else:
                assert got.data.dtype == expected.data.dtype, got.name
                assert got.data.tobytes() == expected.data.tobytes(), got.name
    [answer] = service.handle_batch(
        [as_request({"images": [b64(f) for f in files]}, {})], lambda a: a
    )
    assert isinstance(answer, ImageAnswer)
    [reply] = ask(service, {"images": [b64(f) for f in files]})
    assert answer.to_row() == json.loads(reply.body)
