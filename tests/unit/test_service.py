"""The serving lifecycle without TorchServe (handlers/service.py): in process, through the TorchServe
adapter and through the MLflow PyFunc, the same requests get the same answers, budget included."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from handlers.base import BATCH_SIZE_HEADER, STREAM_NEXT_HEADER
from handlers.errors import REQUEST_ID_HEADER, RequestError, refusal
from handlers.frequency.model import FrequencyModel
from handlers.frequency.state import KEY_FILE_ENV
from handlers.frequency_handler import FrequencyHandler
from handlers.sentiment.model import SentimentModel
from handlers.sentiment_handler import SentimentHandler
from handlers.service import ModelService, Request
from tests.unit.test_sentiment_handler import SERVE_CONFIG, write_toy_artifacts

KEY = b"a-test-key-shared-by-every-worker"
LONG = "a rather long review that goes on about the plot and the cast " * 3


class FakeContext:
    """The slice of TorchServe's Context the adapter uses, and nothing of TorchServe."""

    def __init__(self, model_dir: Path, config: dict, headers: list[dict] | None = None):
        self.system_properties = {"model_dir": str(model_dir), "gpu_id": None}
        self.model_name = None
        self.model_yaml_config = {"batchSize": 8, "handler": config}
        self.request_ids = {}
        self._headers = headers or []
        self.status, self.content_type, self.response_headers = {}, {}, {}

    def get_all_request_header(self, idx: int) -> dict:
        return self._headers[idx]

    def set_response_header(self, idx: int, name: str, value: str) -> None:
        self.response_headers.setdefault(idx, {})[name] = value

    def set_response_content_type(self, idx: int, value: str) -> None:
        self.content_type[idx] = value

    def set_response_status(self, code: int, phrase: str, idx: int = 0) -> None:
        self.status[idx] = code


def served(handler, requests: list[Request]) -> list[tuple[int, str, object, dict]]:
    """Through the adapter: (status, content type, body, response headers) per request."""
    ctx = FakeContext(Path("unused"), {}, [torchserve_headers(r) for r in requests])
    ctx.request_ids = {i: r.id for i, r in enumerate(requests)}
    out = handler.handle([{"body": r.body} | dict(r.parts) for r in requests], ctx)
    return [
        (ctx.status.get(i, 200), ctx.content_type[i], body, ctx.response_headers[i])
        for i, body in enumerate(out)
    ]


def torchserve_headers(request: Request) -> dict:
    """The headers TorchServe hands a worker for this request: the body's own content type under
    its parameter name beside the HTTP headers."""
    own = {} if request.media_type is None else {"body": {"content-type": request.media_type}}
    return own | dict(request.headers)


def in_process(service: ModelService, requests: list[Request]):
    """The same, straight from handle_batch (no adapter, no context): every answer carries its
    request id (X-Request-ID, and the error body's `request_id`)."""
    results = []
    for request, r in zip(requests, service.handle_batch(requests), strict=True):
        rid = {REQUEST_ID_HEADER: request.id}
        if isinstance(r, RequestError):
            status, headers, body = refusal(r, request.id)
            results.append((status, "application/json", body, headers | rid))
        else:
            results.append((200, r.content_type, r.body, dict(r.headers) | rid))
    return results


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory) -> Path:
    return write_toy_artifacts(tmp_path_factory.mktemp("toy-sentiment"))


def json_request(payload, i: int, **headers) -> Request:
    return Request(
        json.dumps(payload).encode(),
        {"Content-Type": "application/json"} | headers,
        f"req-{i}",
        media_type="application/json",
    )


def sentiment_batch() -> list[Request]:
    return [
        json_request({"text": LONG}, 0),
        json_request({"texts": ["good fun", "awful plot"]}, 1),
        Request(b"{not json", {"Accept": "*/*"}, "req-2", media_type="application/json"),
        json_request({"text": "good"}, 3, explain="True"),
        json_request({"text": LONG}, 4),  # past the budget below: 503
        json_request({"text": "not very good"}, 5),
    ]


def test_in_process_answers_equal_the_torchserve_adapters(toy_dir):
    config = SERVE_CONFIG | {"max_batch_tokens": 28}
    handler = SentimentHandler()
    handler.initialize(FakeContext(toy_dir, config))
    service = ModelService.from_dir(toy_dir, config=config)
    requests = sentiment_batch()
    got, want = served(handler, requests), in_process(service, requests)
    assert [s for s, *_ in got] == [200, 200, 400, 200, 503, 200]
    assert [w["text"] for w in json.loads(got[3][2])["words"]] == ["good"]  # explained
    for (s, ctype, body, headers), (s2, ctype2, body2, headers2) in zip(got, want, strict=True):
        assert (s, ctype, json.loads(body)) == (s2, ctype2, json.loads(body2))
        assert headers[BATCH_SIZE_HEADER] == "6"
        assert STREAM_NEXT_HEADER not in headers  # REST rows never stream
        assert {k: v for k, v in headers.items() if k != BATCH_SIZE_HEADER} == headers2


def test_frequency_in_process_answers_equal_the_adapters_float32_included(
    frequency_artifacts, monkeypatch, tmp_path
):
    key = tmp_path / "key"
    key.write_bytes(KEY)
    monkeypatch.setenv(KEY_FILE_ENV, str(key))
    config = {"runtime": "onnx", "threads": 1, "max_samples": 5000, "mc_samples": 8}
    handler = FrequencyHandler()
    handler.initialize(FakeContext(frequency_artifacts, config))
    service = ModelService(FrequencyModel.load(frequency_artifacts, config, state_key=KEY))
    signal = np.sin(np.arange(400) / 7).astype("<f4")
    requests = [
        json_request({"signal": signal.tolist(), "frequencies": [1]}, 0),
        json_request({"signal": signal.tolist(), "stream": True}, 1),
        Request(
            signal.tobytes(),
            {"Accept": "application/octet-stream"},
            "req-2",
            media_type="application/octet-stream",
        ),
        json_request({"signal": []}, 3),
    ]
    got, want = served(handler, requests), in_process(service, requests)
    assert [s for s, *_ in got] == [200, 200, 200, 400]
    for (s, ctype, body, headers), (s2, ctype2, body2, headers2) in zip(got, want, strict=True):
        assert (s, ctype) == (s2, ctype2)
        if ctype == "application/octet-stream":
            assert body == body2
        else:
            assert json.loads(body) == json.loads(body2)
        assert {k: v for k, v in headers.items() if k != BATCH_SIZE_HEADER} == headers2


def test_a_model_without_torchserve_runs_with_silent_telemetry(toy_dir):
    service = ModelService(SentimentModel.load(toy_dir, SERVE_CONFIG, "cpu", "toy"))
    [reply] = service.handle_batch([Request({"text": "good fun"})])
    assert json.loads(reply.body)["model"]["name"] == "toy"


def test_the_pyfunc_answers_an_over_budget_row_as_the_server_answers_it_alone(toy_dir, tmp_path):
    """Guard: the PyFunc is a batch job, so a row TorchServe refuses as retryable (503 overloaded:
    its neighbours spent the batch's work budget) is run again in a smaller batch, never written as
    the row's answer; each row's answer is then the server's answer to that row alone. (It used to
    run every row with no budget at all, and later wrote the 503 as the row's answer.)"""
    pytest.importorskip("mlflow")
    from training.pyfunc_model import ServedModel

    staged = tmp_path / "staged"
    shutil.copytree(toy_dir, staged)
    config = SERVE_CONFIG | {"max_batch_tokens": 12}
    (staged / "model-config.yaml").write_text(yaml.safe_dump({"batchSize": 8, "handler": config}))

    class MLflowContext:  # mlflow.pyfunc.PythonModelContext's two attributes
        artifacts = {"model_dir": str(staged)}
        model_config: dict = {}

    pyfunc = ServedModel()
    pyfunc.load_context(MLflowContext())
    pd = pytest.importorskip("pandas")
    texts = [LONG, LONG, "fun"]
    got = pyfunc.predict(None, pd.DataFrame({"text": texts}))

    handler = SentimentHandler()
    handler.initialize(FakeContext(staged, config))
    together = served(handler, [json_request({"text": t}, i) for i, t in enumerate(texts)])
    # The fault the PyFunc must not copy: in one batch the server refuses rows 1 and 2.
    assert [status for status, *_ in together] == [200, 503, 503]
    for i, (row, text) in enumerate(zip(got, texts, strict=True)):
        [(status, _, body, _)] = served(handler, [json_request({"text": text}, i)])
        assert status == 200 and "status" not in row
        assert row == json.loads(body)


def test_the_pyfunc_batches_rows_as_torchserve_forms_batches(toy_dir, tmp_path):
    """Rows past batchSize go into the next batch with a fresh budget, as served."""
    pytest.importorskip("mlflow")
    pd = pytest.importorskip("pandas")
    from training.pyfunc_model import ServedModel

    staged = tmp_path / "staged"
    shutil.copytree(toy_dir, staged)
    config = SERVE_CONFIG | {"max_batch_tokens": 12}
    (staged / "model-config.yaml").write_text(yaml.safe_dump({"batchSize": 1, "handler": config}))

    class MLflowContext:  # mlflow.pyfunc.PythonModelContext's two attributes
        artifacts = {"model_dir": str(staged)}
        model_config: dict = {}

    pyfunc = ServedModel()
    pyfunc.load_context(MLflowContext())
    got = pyfunc.predict(None, pd.DataFrame({"text": [LONG, LONG, "fun"]}))
    assert all("label" in row for row in got)
