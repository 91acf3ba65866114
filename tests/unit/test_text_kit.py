"""The text kit's bad-input and cost cases, written once and run over every registered model built
on the kit (its registry entry's `kits`): each model of the modality inherits them. A model's tiny
export comes from its session fixture `<name>_artifacts` (tests/fixtures/), its limits from its
own model-config.yaml; every request goes through the model's `ModelService`, as served."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from clients.kits.text import render_html
from handlers import registry
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config
from tests.support import wire

TEXT_MODELS = [s.name for s in registry.MODELS if "text" in s.kits]
JSON = {"Content-Type": "application/json"}
TEXT = {"Content-Type": "text/plain"}
LONG = "An astonishing, moving film with a superb cast and a patient, quiet script. " * 12
"""Far past any served window: its tokens are cut head+tail, so it costs the window, not its
length."""


def test_the_kit_has_models():
    assert "sentiment" in TEXT_MODELS


@pytest.fixture(scope="module", params=TEXT_MODELS)
def model(request) -> tuple[str, Path]:
    """(name, its tiny export)."""
    return request.param, request.getfixturevalue(f"{request.param}_artifacts")


def served(model: tuple[str, Path], **overrides: object) -> ModelService:
    """The model as its archive serves it (its model-config's limits), on one thread, fp32."""
    name, artifacts = model
    config = handler_config(name) | {"threads": 1, "runtime": "onnx"} | overrides
    return ModelService.from_dir(artifacts, name=name, config=config)


@pytest.fixture(scope="module")
def service(model) -> ModelService:
    return served(model)


def as_request(body: object, headers: dict) -> Request:
    """A JSON value as the client's bytes; (bytes, headers) as sent."""
    if isinstance(body, tuple):
        data, sent = body
        return Request(data, headers | sent)
    return Request(json.dumps(body).encode(), headers | JSON)


def ask(service: ModelService, *bodies: object, explain: bool = False) -> list:
    headers = {"explain": "True"} if explain else {}
    service.explain_share.spans.clear()  # explanations' share of the worker: never the limit here
    return service.handle_batch([as_request(b, headers) for b in bodies])


def window(service: ModelService) -> int:
    """Tokens one text costs at most: the served length, special tokens included."""
    encoder = service.model.predictor.encoder
    return encoder.budget + len(encoder.prefix) + len(encoder.suffix)


def bad_cases(service: ModelService) -> list[tuple[str, object, int, str]]:
    """(name, request body or (bytes, headers), status, kind) from the model's own limits."""
    s = service.settings
    big = s.max_text_bytes + 1
    return [
        ("empty text", {"text": ""}, 400, "empty_input"),
        ("blank text", {"text": " \n\t "}, 400, "empty_input"),
        ("empty body", (b"", TEXT), 400, "empty_input"),
        ("empty list", {"texts": []}, 400, "empty_input"),
        ("an empty text in the list", {"texts": ["fine", ""]}, 400, "empty_input"),
        ("too many texts", {"texts": ["fine"] * (s.max_texts + 1)}, 400, "too_large"),
        ("a number", {"text": 5}, 400, "bad_field"),
        ("null", {"text": None}, 400, "bad_field"),
        ("a list as text", {"text": ["a"]}, 400, "bad_field"),
        ("texts not a list", {"texts": "a"}, 400, "bad_field"),
        ("a number in the list", {"texts": ["fine", 3]}, 400, "bad_field"),
        ("both keys", {"text": "a", "texts": ["b"]}, 400, "bad_field"),
        ("neither key", {"review": "a"}, 400, "bad_field"),
        ("an array body", ["a"], 400, "bad_field"),
        ("a JSON string body", "a", 400, "bad_field"),
        ("not JSON", (b"{not json", JSON), 400, "bad_encoding"),
        ("not UTF-8 text", (b"\xff\xfe bad", TEXT), 400, "bad_encoding"),
        ("not UTF-8 JSON", (b"\xff\xfe bad", JSON), 400, "bad_encoding"),
        ("lone surrogate", (b'{"text": "\\ud800 x"}', JSON), 400, "bad_encoding"),
        ("too many bytes", {"text": "x" * big}, 400, "too_large"),
        ("too many bytes, 2 per character", {"text": "\u00e9" * (big // 2 + 1)}, 400, "too_large"),
        ("too many bytes in the list", {"texts": ["fine", "x" * big]}, 400, "too_large"),
        ("too many bytes as text/plain", (b"y" * big, TEXT), 400, "too_large"),
        ("an image", (b"\x89PNG\r\n\x1a\n", {"Content-Type": "image/png"}), 415, "unsupported_media_type"),
        (
            "compressed",
            (b'{"text": "fine"}', JSON | {"Content-Encoding": "gzip"}),
            415,
            "unsupported_media_type",
        ),
    ]  # fmt: skip


def test_every_bad_input_is_a_clear_4xx_and_its_neighbours_are_answered(service):
    cases = bad_cases(service)
    for at in range(0, len(cases), 7):
        chunk = cases[at : at + 7]
        results = ask(service, {"text": "A fine film."}, *(c[1] for c in chunk))
        assert results[0].content_type == "application/json", results[0]
        for (name, _, status, kind), got in zip(chunk, results[1:], strict=True):
            assert (getattr(got, "status", 200), getattr(got, "kind", None)) == (status, kind), (
                name,
                got,
            )
            assert got.reason and got.reason.isascii(), name


def test_a_bad_input_asking_for_an_explanation_is_the_same_4xx(service):
    for name, body, status, kind in bad_cases(service)[:8]:
        [got] = ask(service, body, explain=True)
        assert (got.status, got.kind) == (status, kind), (name, got)


def test_a_text_costs_its_tokens_after_truncation_priced_before_it_runs(service):
    """The token budget prices a parsed request before any work: a long text costs the window,
    not its length; a short one its own tokens."""
    model = service.model
    [tokens] = model.budgets
    assert tokens.unit == "tokens"
    long, short = (model.parse(as_request({"texts": t}, {})) for t in ([LONG] * 3, ["Fine."]))
    assert tokens.cost(long) == 3 * window(service)
    assert 0 < tokens.cost(short) < window(service)


def test_texts_past_the_batch_token_budget_get_503_and_the_first_always_runs(service):
    s = service.settings
    many = {"texts": [LONG] * s.max_texts}
    n = s.max_batch_tokens // (s.max_texts * window(service)) + 1
    results = ask(service, *([many] * (n + 1)), {"text": "Fine."})
    assert results[0].content_type == "application/json", results[0]
    refused = [r for r in results if getattr(r, "status", 200) == 503]
    assert refused and all(r.kind == "overloaded" and "tokens" in r.reason for r in refused)
    assert all(r.retry_after_s for r in refused)
    # One alone is never refused, however large the limits let it be.
    [alone] = ask(service, many)
    assert alone.content_type == "application/json", alone


def test_explanations_are_priced_in_token_passes_per_request_and_per_batch(model, service):
    s = service.settings
    explainer = service.model.explainer
    passes = explainer.cost(LONG)
    assert passes == min(len(LONG.split()) + 1, s.explain_passes)  # bounded, whatever the length
    one = passes * window(service)
    # Past the per-request limit (tightened to two long texts' worth): 400 before anything runs.
    tight = served(model, max_explain_tokens=2 * one, max_batch_explain_tokens=2 * one)
    [big] = ask(tight, {"texts": [LONG] * 3}, explain=True)
    assert (big.status, big.kind) == (400, "too_large"), big
    assert f"{3 * one} token-passes" in big.reason
    # Within it, the batch's explanation budget refuses the next such request (503).
    fits = {"texts": [LONG] * 2}
    first, second = ask(tight, fits, fits, explain=True)
    assert first.content_type == "application/json", first
    assert (second.status, second.kind) == (503, "overloaded"), second
    assert "token-passes of explanations" in second.reason


def test_an_explanation_spends_no_more_passes_than_it_was_priced_at(service):
    [reply] = ask(service, {"texts": [LONG, "Fine, fine film."]}, explain=True)
    long, short = json.loads(reply.body)
    explainer = service.model.explainer
    assert long["evaluations"] <= explainer.cost(LONG)
    assert short["evaluations"] == explainer.cost("Fine, fine film.") == 4
    assert long["truncated"] and not short["truncated"]
    # Words the model never saw (cut by head+tail truncation) are attributed nothing.
    assert any(w["attribution"] == 0 for w in long["words"])
    assert [w["text"] for w in short["words"]] == ["Fine", "fine", "film"]
    # The kit's view shows every word of the text, escaped.
    page = render_html(LONG, long)
    assert page.count('class="w"') == len(long["words"]) and "<script" not in page


def test_more_texts_than_the_limit_as_a_tensor_are_refused_from_its_size(service, monkeypatch):
    """Past `max_texts`, the tensor form is refused with the JSON body's message before any
    element is decoded (the tensor's size says how many texts it holds)."""
    from handlers.errors import TooLarge
    from handlers.kits.text import inputs, oip

    def no_decoding(*args):
        raise AssertionError("a text was decoded before the count was checked")

    monkeypatch.setattr(inputs, "tensor_texts", no_decoding)
    limit = service.settings.max_texts
    tensors = {"text": np.array([b"fine"] * (limit + 1), dtype=object)}
    with pytest.raises(TooLarge, match=f"has {limit + 1} items; the limit is {limit}"):
        oip.request_of(tensors, {}, service.settings)


def test_texts_as_a_bytes_tensor_are_the_json_texts_request(service):
    """The kit's tensor contract (oip.py): a BYTES element per text, sent on as {"texts": [...]},
    so its checks and limits apply; text that is not UTF-8 is the protocol's 400."""
    from handlers.errors import BadEncoding
    from handlers.kits.text import oip
    from oip.contract import Contract

    settings = service.settings
    contract = Contract(service.model.name, settings)
    texts = ["A fine film.", "Dull, \u00e9 overlong."]
    tensors = {"text": np.array([t.encode() for t in texts], dtype=object)}
    native = wire.native(contract, tensors, {})
    [reply] = service.handle_batch([Request(native.body, native.headers)])
    [direct] = ask(service, {"texts": texts})
    assert reply.body == direct.body
    outputs = wire.answer(contract, reply)
    assert [o.name for o in outputs] == [t.name for t in oip.outputs(settings)]
    assert all(len(o.data) == len(texts) for o in outputs)
    with pytest.raises(BadEncoding, match=r"text\[1\] is not valid UTF-8") as err:
        wire.native(contract, {"text": np.array([b"fine", b"\xff\xfe"], dtype=object)}, {})
    assert err.value.status == 400
    [empty] = service.handle_batch(
        [Request(wire.native(contract, {"text": np.array([b" "], dtype=object)}, {}).body, JSON)]
    )
    assert (empty.status, empty.kind) == (400, "empty_input")


def test_the_typed_forms_round_trip_and_an_oip_infer_does_no_json(service, monkeypatch):
    """The kit's typed request and answer (inputs.TextRequest, codec.Classification): the JSON,
    tensor and row forms carry the same values, and the OIP contract path (tensors → typed
    request → the worker → tensors) parses and writes no JSON at all."""
    from handlers.kits.text.codec import Classification
    from handlers.kits.text.inputs import TextRequest
    from oip.contract import Contract
    from tests.support.json_calls import json_calls

    settings = service.settings
    texts = ["A fine film.", "Dull, \u00e9 overlong."]
    typed = TextRequest.from_tensors({"text": np.array([t.encode() for t in texts], dtype=object)})
    assert wire.request_json(typed) == {"texts": texts}
    [answer] = service.handle_batch([Request(None, typed=typed)], write=lambda a: a)
    assert isinstance(answer, Classification)
    [reply] = ask(service, {"texts": texts})
    assert wire.read_answer(Classification, reply.body) == answer and answer.to_json() == reply.body
    assert answer.to_row() == json.loads(reply.body)
    [one] = service.handle_batch(
        [Request(None, typed=TextRequest((texts[0],), many=False))], lambda a: a
    )
    assert one.to_row() == json.loads(ask(service, {"text": texts[0]})[0].body)

    contract = Contract(service.model.name, settings)
    item = type("Input", (), {"name": "text", "datatype": "BYTES", "shape": [2], "data": texts})
    with json_calls(monkeypatch) as calls:
        arrays = contract.read_inputs([item])
        request = contract.request(arrays, {}, "r1", explain=False)
        [outputs] = service.handle_batch([request], contract.write)
    assert not calls, calls
    assert request.body is None and isinstance(request.typed, TextRequest)
    want = answer.to_tensors(settings.export.labels)
    assert [o.name for o in outputs] == [o.name for o in want]
    for got, expected in zip(outputs, want, strict=True):
        assert got.datatype == expected.datatype and np.array_equal(got.data, expected.data)
