"""The largest inputs /predictions takes, explained: each is explained within its model's budget
or refused with the reason (400 too_large naming the cost and the limit), never a 500, and a
refusal comes before any forward pass. Through the same service TorchServe's adapter calls, with
the archives' own serving settings and tiny trained models."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
from PIL import Image

from handlers.errors import RequestError
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config

EXPLAIN = {"explain": "true"}


def explain(service: ModelService, body: dict) -> tuple[int, dict]:
    [reply] = service.handle_batch([Request(json.dumps(body).encode(), EXPLAIN)])
    if isinstance(reply, RequestError):
        return reply.status, reply.to_body()
    return 200, json.loads(reply.body)


def test_a_20000_sample_signal_is_refused_with_its_cost_not_a_500(frequency_artifacts):
    config = handler_config("frequency")
    service = ModelService.from_dir(frequency_artifacts, "frequency", config)
    signal = np.sin(np.linspace(0, 400, 20_000)).round(4).tolist()
    assert service.model.settings.max_samples >= 20_000  # a prediction takes it
    ran = []
    explainer = service.model.explainer
    real = explainer.explain
    explainer.explain = lambda r: ran.append(r) or real(r)
    status, body = explain(service, {"signal": signal, "frequencies": [1]})
    assert status == 400 and body["kind"] == "too_large", body
    assert "sample-passes" in body["error"] and "the limit is 400000" in body["error"]
    assert ran == []
    # The longest signal its budget does afford is explained.
    status, body = explain(service, {"signal": signal[:2000], "frequencies": [1]})
    assert status == 200 and np.asarray(body["attributions"]).shape == (1, 2000), body


def test_a_64x64_image_is_explained_over_the_models_input_pixels(digits_artifacts):
    service = ModelService.from_dir(digits_artifacts, "digits", handler_config("digits"))
    pixels = np.random.default_rng(0).integers(0, 255, (64, 64), np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    image = base64.b64encode(buf.getvalue()).decode()
    status, body = explain(service, {"image": image})
    assert status == 200, body
    h, w = body["shape"]
    assert np.asarray(body["attributions"]).shape == (h, w) and h * w < 64 * 64
    # Its price does not grow with the sent image: the map is over the model's input.
    assert service.model.explainer.cost() <= service.model.settings.max_explain_passes
