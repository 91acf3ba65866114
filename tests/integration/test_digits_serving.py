"""The digits archives in a real TorchServe: the CNN and the ResNet-shaped export, built from the
same training code and served by the same handler with no change; JSON grids and PNG uploads;
image bombs, broken files and bad numbers refused per request while their neighbours are answered."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from deploy.ts_files import java_tmpdir
from handlers.digits.predict import DigitsPredictor
from tests.fixtures.served import handler_config
from tests.support.torchserve import among_neighbours, job_queue_size, send_waves, start_torchserve
from tests.unit.test_digits_codec import png_claiming
from training.digits.data import load_splits

pytestmark = pytest.mark.integration
MODELS = ("digits", "digits_resnet")


@pytest.fixture(scope="module")
def server(digits_archive, digits_resnet_archive, tmp_path_factory):
    archives = {"digits": digits_archive, "digits_resnet": digits_resnet_archive}
    ts = start_torchserve(tmp_path_factory.mktemp("digits-served"), archives)
    try:
        yield ts
    finally:
        ts.stop()


def test_the_servers_workers_listen_in_a_short_folder_of_its_own(server):
    """Test and bench servers keep worker sockets out of /tmp and within AF_UNIX's 107 bytes
    (deploy.ts_files.java_tmpdir), whatever folder their work is in."""
    sockets = {Path(p) for p in re.findall(r"Listening on port: (\S+)", server.logs())}
    assert sockets and {s.parent for s in sockets} == {java_tmpdir(server.workdir)}
    assert all(len(str(s).encode()) <= 107 for s in sockets)


@pytest.fixture(scope="module")
def greys() -> np.ndarray:
    return load_splits()["test"].greys[:6]


def png(grey: np.ndarray, scale: int = 1) -> bytes:
    im = Image.fromarray((grey * 255).round().astype(np.uint8))
    im = im.resize((8 * scale, 8 * scale), Image.Resampling.NEAREST)
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def grid(grey: np.ndarray) -> list:
    return (grey * 16).round(4).tolist()


@pytest.mark.parametrize("model", MODELS)
def test_both_architectures_answer_through_the_one_handler(
    server, model, greys, digits_artifacts, digits_resnet_artifacts
):
    artifacts = digits_artifacts if model == "digits" else digits_resnet_artifacts
    local = DigitsPredictor.from_dir(artifacts, handler_config("digits"), name=model)
    resp = server.post(f"/predictions/{model}", json={"images": [grid(g) for g in greys]})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    want = local.classify(list(greys))
    assert [b["label"] for b in body] == [w.label for w in want]
    for b, w in zip(body, want, strict=True):
        np.testing.assert_allclose(
            [b["probabilities"][k] for k in w.probabilities],
            list(w.probabilities.values()),
            atol=1e-5,
        )
        assert b["model"] == local.model_info
    assert body[0]["model"]["arch"] == ("cnn" if model == "digits" else "resnet")


@pytest.mark.parametrize("model", MODELS)
def test_png_upload_answers_like_the_json_grid(server, model, greys):
    """The same pixels as a PNG and as a JSON grid get the same answer. The grid carries the PNG's
    8-bit levels: a tiny test model can sit near a tie between two labels, where the 8-bit
    rounding of a PNG alone would decide it."""
    levels = np.round(greys[0] * 255) / 255
    by_png = server.post(
        f"/predictions/{model}", data=png(levels), headers={"Content-Type": "image/png"}
    )
    by_grid = server.post(f"/predictions/{model}", json={"image": grid(levels)})
    assert by_png.status_code == by_grid.status_code == 200, by_png.text
    assert by_png.json()["label"] == by_grid.json()["label"], (by_png.json(), by_grid.json())
    png_p, grid_p = by_png.json()["probabilities"], by_grid.json()["probabilities"]
    assert png_p.keys() == grid_p.keys()
    assert max(abs(png_p[k] - grid_p[k]) for k in png_p) < 1e-3


def image_file(fmt: str) -> bytes:
    buf = io.BytesIO()
    Image.new("L", (16, 16), 128).save(buf, fmt)
    return buf.getvalue()


TWO_PARTS = (
    b"--xyz\r\nContent-Disposition: form-data; name=data\r\n\r\n"
    + json.dumps({"image": [[8] * 8] * 8}).encode()
    + b"\r\n--xyz\r\nContent-Disposition: form-data; name=note\r\n\r\nunseen\r\n--xyz--\r\n"
)

BAD = [
    ("bomb", png_claiming(100_000, 100_000), "image/png", 400, "too_large"),
    # Sent without their type these fell through to JSON: 400 "the body is not valid UTF-8".
    ("gif bytes", image_file("GIF"), "application/octet-stream", 415, "unsupported_media_type"),
    ("tiff bytes", image_file("TIFF"), "application/octet-stream", 415, "unsupported_media_type"),
    # The part named data was read, the other dropped unseen: answered 200.
    ("two-part form", TWO_PARTS, "multipart/form-data; boundary=xyz", 400, "bad_field"),
    ("truncated", None, "image/png", 400, "bad_encoding"),
    ("text as png", b"not an image at all", "image/png", 400, "bad_encoding"),
    ("gif", b"GIF89a\x01\x00\x01\x00", "image/gif", 415, "unsupported_media_type"),
    ("nan", b'{"image": [[NaN, 0, 0, 0, 0, 0, 0, 0]]}', "application/json", 400, "bad_field"),
    (
        "ragged",
        json.dumps({"image": [[0] * 8] * 7 + [[0] * 3]}).encode(),
        "application/json",
        400,
        "bad_field",
    ),
    (
        "out of range",
        json.dumps({"image": [[99] * 8] * 8}).encode(),
        "application/json",
        400,
        "bad_field",
    ),
]


def test_bad_inputs_are_refused_alone_and_neighbours_answered(server, greys):
    good = json.dumps({"image": grid(greys[1])}).encode()
    truncated = png(greys[2], scale=8)
    cases = [(n, truncated[:50] if b is None else b, c, s, k) for n, b, c, s, k in BAD]
    good_case = ("good", good, "application/json", 200, None)
    waves = among_neighbours(good_case, cases, job_queue_size("digits"))

    def send(case):
        name, body, ctype, _, _ = case
        return server.post("/predictions/digits", data=body, headers={"Content-Type": ctype})

    sends = [case for wave in waves for case in wave]
    responses = send_waves(send, waves)  # each wave at once: TorchServe batches it together
    labels = set()
    for (name, _, _, status, kind), resp in zip(sends, responses, strict=True):
        assert resp.status_code == status, (name, resp.text)
        if kind:
            assert resp.json()["kind"] == kind, name
        else:
            labels.add(resp.json()["label"])
    assert len(labels) == 1  # every good request got the same answer, whatever its batch
    assert "Worker disconnected" not in server.logs("ts_log.log")
