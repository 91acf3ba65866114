"""POST /explanations/<model> for every registered model on a real TorchServe (the session's shared
`served` server, tiny archives): the same attributions over REST, over gRPC (an `explain` input)
and in process through the model's service; predictions in the same batches unchanged; the
command line writes the page and images."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clients import PROTOCOLS, connect
from handlers.service import ModelService, Request
from tests.integration.test_clients import assert_close, settings_for
from tests.support.torchserve import ROOT
from tools import registry

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def both(served):
    opened = {p: connect(p, settings_for(served)) for p in PROTOCOLS}
    yield opened
    for c in opened.values():
        c.close()


def in_process(served, model: str, body: dict):
    from tests.fixtures.served import handler_config

    service = ModelService.from_dir(served.artifacts[model], model, handler_config(model))
    [reply] = service.handle_batch([Request(json.dumps(body).encode(), {"explain": "true"})])
    return json.loads(reply.body)


@pytest.mark.parametrize("model", registry.names())
def test_every_model_explains_the_same_over_rest_grpc_and_in_process(served, both, model):
    assert model in served.models  # the shared server serves every registered model
    body = registry.get(model).example()
    body.pop("stream", None)
    rest = both["rest"].explain(model, body)
    assert_close(rest, both["grpc"].explain(model, body))
    assert_close(rest, in_process(served, model, body))
    assert rest["model"]["name"] == model


def test_sentiment_words_carry_offsets_into_the_request_text(both):
    text = "Dull, overlong -- but the cast? Wonderful!"
    answer = both["rest"].explain("sentiment", {"text": text})
    assert [w["text"] for w in answer["words"]] == [
        "Dull", "overlong", "but", "the", "cast", "Wonderful",
    ]  # fmt: skip
    assert all(text[w["start"] : w["end"]] == w["text"] for w in answer["words"])


def test_frequency_attributes_every_sample_per_frequency(both):
    signal = np.sin(np.linspace(0, 12, 300)).round(4).tolist()
    answer = both["rest"].explain("frequency", {"signal": signal, "frequencies": [1, 3]})
    a = np.asarray(answer["attributions"])
    assert a.shape == (2, 300) and answer["frequencies"] == [1.0, 3.0]


def test_explanations_beside_predictions_leave_them_unchanged(served):
    from concurrent.futures import ThreadPoolExecutor

    body = {"text": "A quietly moving film with a fine cast."}
    alone = served.post("/predictions/sentiment", json=body).json()
    with ThreadPoolExecutor(8) as pool:
        futures = [
            pool.submit(served.post, f"/{route}/sentiment", json=body)
            for route in ["explanations", "predictions"] * 4
        ]
        results = [f.result() for f in futures]
    for r, route in zip(results, ["explanations", "predictions"] * 4, strict=True):
        assert r.status_code == 200, r.text
        if route == "predictions":
            assert_close(r.json(), alone)


def test_the_command_line_writes_the_page(served, tmp_path):
    config = Path(served.workdir) / "config.properties"
    page = tmp_path / "why.html"
    out = subprocess.run(
        [sys.executable, "-m", "clients", "explain", "sentiment", "--text", "A warm, funny film",
         "--html", str(page), "--config", str(config)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["target"] in ("negative", "positive")
    assert page.read_text().count('class="w"') == 4


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("digits", ["--grid", json.dumps(registry.get("digits").example()["image"])]),
        ("frequency", ["--synthetic", "300", "--frequencies", "1,3"]),
    ],
)
def test_the_command_line_draws_images(served, tmp_path, model, options):
    from PIL import Image

    config = Path(served.workdir) / "config.properties"
    png = tmp_path / "why.png"
    out = subprocess.run(
        [sys.executable, "-m", "clients", "explain", model, *options, "--png", str(png),
         "--config", str(config)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    with Image.open(png) as im:
        assert im.size[0] > 300 and im.size[1] > 200
