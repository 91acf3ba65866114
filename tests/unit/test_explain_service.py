"""Explanations through the serving lifecycle (handlers/service.py, handlers/explain.py): each
request's own mode, the same answers in process and through the TorchServe adapter, and bounded:
too costly alone is a fast 400, past the batch's explanation budget a 503 with Retry-After; a
model that does not explain refuses alone with 501."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from handlers.sentiment_handler import SentimentHandler
from handlers.service import ModelService, Request
from tests.unit.test_sentiment_handler import SERVE_CONFIG
from tests.unit.test_service import FakeContext, in_process, json_request, served, toy_dir  # noqa: F401

EXPLAIN = {"explain": "True"}


def bodies(results):
    return [(s, rounded(json.loads(b))) for s, _, b, _ in results]


def rounded(x):
    """Answers compared to 6 decimals: a batch of 2 and a batch of 1 may differ in the last float
    bits of a BLAS reduction (the surface suite compares neighbours the same way)."""
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def test_each_request_keeps_its_own_mode_in_process_and_served(toy_dir):  # noqa: F811
    service = ModelService.from_dir(toy_dir, config=SERVE_CONFIG)
    handler = SentimentHandler()
    handler.initialize(FakeContext(toy_dir, SERVE_CONFIG))
    batch = [
        json_request({"text": "good fun"}, 0),
        json_request({"text": "good fun"}, 1, **EXPLAIN),
        json_request({"texts": ["awful plot", "great acting"]}, 2, **EXPLAIN),
        json_request({"text": "good fun"}, 3),
    ]
    got = bodies(in_process(service, batch))
    assert got == bodies(served(handler, batch))
    alone = bodies(in_process(service, [batch[0]]))[0]
    assert got[0] == got[3] == alone  # predictions beside explanations: as alone
    assert got[1][0] == 200 and [w["text"] for w in got[1][1]["words"]] == ["good", "fun"]
    assert got[1] == bodies(in_process(service, [batch[1]]))[0]  # explained as alone
    assert [[w["text"] for w in e["words"]] for e in got[2][1]] == [
        ["awful", "plot"],
        ["great", "acting"],
    ]


def test_grpc_asks_with_an_explain_input_beside_the_body(toy_dir):  # noqa: F811
    service = ModelService.from_dir(toy_dir, config=SERVE_CONFIG)
    body = json.dumps({"text": "good fun"}).encode()
    grpc_parts = {"explain": b"true"}  # an input beside the body
    [reply] = service.handle_batch([Request(body, {}, "g", grpc_parts)])
    assert [w["text"] for w in json.loads(reply.body)["words"]] == ["good", "fun"]
    [reply] = service.handle_batch([Request(body, {}, "p")])
    assert "label" in json.loads(reply.body)


def test_too_costly_alone_is_refused_before_anything_runs(toy_dir):  # noqa: F811
    config = SERVE_CONFIG | {"max_explain_tokens": 30, "max_batch_explain_tokens": 30}
    service = ModelService.from_dir(toy_dir, config=config)
    long = " ".join(["good", "fun", "plot"] * 4)
    start = time.perf_counter()
    [(status, body)] = bodies(in_process(service, [json_request({"text": long}, 0, **EXPLAIN)]))
    assert status == 400 and body["kind"] == "too_large" and "token-passes" in body["error"]
    assert time.perf_counter() - start < 0.5


def test_past_the_batch_explanation_budget_is_a_503_with_retry_after(toy_dir):  # noqa: F811
    config = SERVE_CONFIG | {"max_explain_tokens": 40, "max_batch_explain_tokens": 40}
    service = ModelService.from_dir(toy_dir, config=config)
    ask = json_request({"text": "good fun plot"}, 0, **EXPLAIN)  # 4 passes x 5 tokens = 20
    results = in_process(service, [ask, ask, ask, json_request({"text": "good"}, 3)])
    assert [r[0] for r in results] == [200, 200, 503, 200]
    assert results[2][3] == {"Retry-After": "1", "X-Request-ID": "req-0"}
    assert json.loads(results[2][2])["kind"] == "overloaded"


def test_a_model_that_does_not_explain_refuses_alone_with_501(toy_dir):  # noqa: F811
    service = ModelService.from_dir(toy_dir, config=SERVE_CONFIG)

    class NoExplain:  # the model's lifecycle hooks without `explain`
        def __init__(self, model):
            self._m = model
            self.name, self.settings = model.name, model.settings

        def __getattr__(self, name):
            if name == "explain":
                raise AttributeError(name)
            return getattr(self._m, name)

    service.model = NoExplain(service.model)
    got = bodies(in_process(service, [json_request({"text": "good"}, 0, **EXPLAIN),
                                      json_request({"text": "good"}, 1)]))  # fmt: skip
    assert got[0][0] == 501 and got[0][1]["kind"] == "not_implemented"
    assert got[1][0] == 200 and "label" in got[1][1]


@pytest.mark.parametrize("fails", ["explain"])
def test_an_explanation_that_raises_is_its_own_500(toy_dir, fails, monkeypatch):  # noqa: F811
    service = ModelService.from_dir(toy_dir, config=SERVE_CONFIG)
    real = service.model.explainer.explain

    def fragile(text, target=None):
        if "poison" in text:
            raise np.linalg.LinAlgError("nobody expected this")
        return real(text, target)

    monkeypatch.setattr(service.model.explainer, "explain", fragile)
    batch = [
        json_request({"text": "poison"}, 0, **EXPLAIN),
        json_request({"text": "good"}, 1, **EXPLAIN),
    ]
    got = bodies(in_process(service, batch))
    assert got[0][0] == 500 and got[0][1]["kind"] == "internal"
    assert got[1] == bodies(in_process(service, [batch[1]]))[0]


def test_explanations_past_their_share_of_the_worker_are_refused_without_running(
    toy_dir,  # noqa: F811
    monkeypatch,
):
    """Guard: with per-batch budgets alone, 2 explanation clients doubled prediction p99 on the
    full model (docs/explanations.md); over time explanations get at most `explain_share`."""
    service = ModelService.from_dir(toy_dir, config=SERVE_CONFIG | {"explain_share": 0.1})
    now = [100.0]
    service.explain_share.clock = lambda: now[0]
    service.explain_share.record(99.0, 100.0)  # 1 s of the last 10: the whole 10% share
    ran = []
    real = service.model.explainer.explain
    monkeypatch.setattr(
        service.model.explainer, "explain", lambda t, target=None: ran.append(t) or real(t, target)
    )
    batch = [json_request({"text": "good"}, 0, **EXPLAIN), json_request({"text": "good"}, 1)]
    got = in_process(service, batch)
    assert [r[0] for r in got] == [503, 200] and ran == []
    assert json.loads(got[0][2])["kind"] == "overloaded"
    assert got[0][3] == {"Retry-After": "1", "X-Request-ID": "req-0"}
    now[0] = 109.5  # the spent second has left the window
    assert [r[0] for r in in_process(service, batch)] == [200, 200] and ran == ["good"]


def test_a_lone_client_explaining_back_to_back_is_never_refused(toy_dir, monkeypatch):  # noqa: F811
    """The share is work-conserving: with no prediction load, explanations run one after another
    whatever they spent (each takes a simulated second: 24 of them fill the window 2.4 times over),
    and a lone client's own prediction between them is no load."""
    service = ModelService.from_dir(toy_dir, config=SERVE_CONFIG | {"explain_share": 0.25})
    now = [100.0]
    service.explain_share.clock = lambda: now[0]
    real = service.model.explainer.explain

    def slow(t, target=None):
        now[0] += 1.0
        return real(t, target)

    monkeypatch.setattr(service.model.explainer, "explain", slow)
    statuses = []
    for i in range(24):
        [explained] = in_process(service, [json_request({"text": "good"}, i, **EXPLAIN)])
        [predicted] = in_process(service, [json_request({"text": "good"}, i)])
        statuses.append((explained[0], predicted[0]))
        now[0] += 0.05  # the client's round trip
    assert statuses == [(200, 200)] * 24
    assert service.explain_share.spent() > service.explain_share.share * 10


def test_under_a_prediction_load_explanations_keep_to_their_share(toy_dir, monkeypatch):  # noqa: F811
    """While predictions take the worker (here 3 s of the last 10), explanations past their share
    are refused without running, in batches with or without predictions beside them; once the
    prediction load has left the window, they run again."""
    service = ModelService.from_dir(toy_dir, config=SERVE_CONFIG | {"explain_share": 0.25})
    now = [100.0]
    service.explain_share.clock = lambda: now[0]
    service.explain_share.record_predictions(90.0, 93.0)
    service.explain_share.record(93.0, 96.0)  # 3 s: past the whole 25 % share
    ran = []
    real = service.model.explainer.explain
    monkeypatch.setattr(
        service.model.explainer, "explain", lambda t, target=None: ran.append(t) or real(t, target)
    )
    alone = [json_request({"text": "good"}, 0, **EXPLAIN)]
    assert [r[0] for r in in_process(service, alone)] == [503] and ran == []
    now[0] = 103.2  # the predictions have left the window; 2.8 s of explanations have not
    assert service.explain_share.spent() >= service.explain_share.share * 10
    assert [r[0] for r in in_process(service, alone)] == [200] and ran == ["good"]


def test_the_longest_text_a_prediction_takes_is_explained_within_its_price(toy_dir):  # noqa: F811
    """Priced before it runs, and priced right: a text of as many words as max_text_bytes allows
    costs `explain_passes` x its tokens, within the per-request limit, and its explanation runs
    no more passes than that. The shipped limits afford a full window (256 tokens) of the default
    recipe at the shipped passes."""
    from handlers.sentiment.settings import SentimentSettings
    from training.sentiment.config import DEFAULT

    shipped = SentimentSettings()
    assert shipped.explain_passes * DEFAULT.max_length <= shipped.max_explain_tokens
    assert shipped.max_explain_tokens <= shipped.max_batch_explain_tokens
    config = SERVE_CONFIG | {"explain_passes": 6}
    service = ModelService.from_dir(toy_dir, config=config)
    longest = " ".join(["good", "fun", "plot", "bad"] * 60)[: config["max_text_bytes"]]
    assert bodies(in_process(service, [json_request({"text": longest}, 0)]))[0][0] == 200
    model = service.model
    [parsed] = [model.parse(Request(json.dumps({"text": longest}).encode()))]
    tokens = model.predictor.encoder.token_count(model.predictor.encoder.pieces([longest]))
    assert model.explain_cost(parsed) == 6 * tokens <= model.settings.max_explain_tokens
    [(status, body)] = bodies(in_process(service, [json_request({"text": longest}, 0, **EXPLAIN)]))
    assert status == 200 and body["method"] == "hierarchical", body
    assert body["evaluations"] <= 6 and len(body["words"]) > 6 and body["truncated"]
