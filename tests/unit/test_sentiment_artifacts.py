"""A TINY training run writes a complete, self-consistent artifact directory."""

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from tokenizers import Tokenizer

from handlers.kits.text.settings import TextExport
from handlers.manifest import read_manifest, sha256_file
from handlers.uncertainty import MLPHead
from training.sentiment.encoding import truncate_ids

HANDLER_KEYS = {
    "input_names",
    "output_names",
    "labels",
    "temperature",
    "max_length",
    "pad_token_id",
    "truncation",
}


@pytest.fixture(scope="module")
def manifest(sentiment_artifacts):
    return read_manifest(sentiment_artifacts)


def test_manifest_lists_every_served_file_with_its_checksum(sentiment_artifacts, manifest):
    files = manifest["files"]
    assert {"model.pt", "model.onnx", "head.npz", "tokenizer/tokenizer.json"} <= set(files)
    for rel, digest in files.items():
        assert sha256_file(sentiment_artifacts / rel) == digest, rel


def test_manifest_is_written_after_everything_else(sentiment_artifacts):
    last = (sentiment_artifacts / "manifest.json").stat().st_mtime_ns
    others = [
        p for p in sentiment_artifacts.rglob("*") if p.is_file() and p.name != "manifest.json"
    ]
    assert others and all(p.stat().st_mtime_ns <= last for p in others)


def test_handler_block_describes_the_export(manifest):
    h = manifest["handler"]
    assert set(h) >= HANDLER_KEYS
    assert h["input_names"] == ["input_ids", "attention_mask"]
    assert h["output_names"] == ["logits", "features"]
    assert h["labels"] == ["negative", "positive"]
    assert h["truncation"] == "head+tail" and 0 < h["head_tokens"] < h["max_length"]
    assert isinstance(h["temperature"], float) and h["temperature"] > 0
    assert manifest["parity"]["passed"] is True
    assert manifest["model"] == "sentiment"


def test_handler_block_is_exactly_the_export_serving_reads(manifest):
    """Training wrote the block through TextExport: parsing it back loses and adds nothing."""
    h = manifest["handler"]
    export = TextExport.from_block(h)
    assert export.to_block() == h
    assert export.feature_dim == 384 and export.tokenizer == "tokenizer/tokenizer.json"


def test_metrics_and_plots_are_written(sentiment_artifacts, manifest):
    metrics = json.loads((sentiment_artifacts / "metrics.json").read_text())
    for key in (
        "test_accuracy",
        "test_accuracy_imdb",
        "ece_before",
        "ece_after",
        "temperature",
        "error_auroc_entropy",
        "error_auroc_mutual_information",
        "mean_entropy_ood_random_tokens",
    ):
        assert key in metrics and key in manifest["metrics"], key
    # Accuracy is a count of right answers over the test split, not any number in [0, 1].
    right = metrics["test_accuracy"] * metrics["test_size"]
    assert right == pytest.approx(round(right), abs=1e-6)
    assert sum(metrics["reliability"]["before"]["count"]) == metrics["test_size"]
    for png in ("training_curve.png", "reliability.png"):
        assert (sentiment_artifacts / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((sentiment_artifacts / "parity.json").read_text())["passed"] is True


def test_onnx_torchscript_and_numpy_head_agree_on_tokenized_text(sentiment_artifacts, manifest):
    """What a handler will do: tokenizer.json → ids → exported graph → head.npz on the features."""
    h = manifest["handler"]
    tok = Tokenizer.from_file(str(sentiment_artifacts / "tokenizer" / "tokenizer.json"))
    texts = ["A wonderful, moving film. " * 20, "dull"]
    rows = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False).ids
        ids = truncate_ids(ids, h["max_length"] - 2, h["head_tokens"])
        rows.append([tok.token_to_id("[CLS]"), *ids, tok.token_to_id("[SEP]")])
    width = max(map(len, rows))
    input_ids = np.full((len(rows), width), h["pad_token_id"], np.int64)
    mask = np.zeros_like(input_ids)
    for i, r in enumerate(rows):
        input_ids[i, : len(r)], mask[i, : len(r)] = r, 1
    assert width == h["max_length"]

    session = ort.InferenceSession(str(sentiment_artifacts / "model.onnx"))
    assert [i.name for i in session.get_inputs()] == h["input_names"]
    assert all(i.type == "tensor(int64)" for i in session.get_inputs())
    logits, features = session.run(
        h["output_names"], {"input_ids": input_ids, "attention_mask": mask}
    )
    assert logits.shape == (2, 2) and logits.dtype == np.float32

    scripted = torch.jit.load(str(sentiment_artifacts / "model.pt"))
    with torch.inference_mode():
        ts_logits, ts_features = scripted(torch.from_numpy(input_ids), torch.from_numpy(mask))
    np.testing.assert_allclose(ts_logits.numpy(), logits, atol=1e-4)
    np.testing.assert_allclose(ts_features.numpy(), features, atol=1e-4)

    head = MLPHead.load(sentiment_artifacts / "head.npz")
    assert features.shape == (2, head.weights[0].shape[1])
    np.testing.assert_allclose(head.forward(features), logits, atol=1e-4)
    assert head.dropout > 0  # MC dropout needs something to sample
