"""model.int8.onnx: the export quantizes the tiny model, gates it against fp32 on the IMDB reviews
of the selection split, writes it only when it passes (then reads the test split once, for the
report), and `runtime: onnx-int8` serves it."""

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest

from deploy.archive import stage_archive
from handlers.sentiment.predict import SentimentPredictor
from training.sentiment.config import DEFAULT, TINY
from training.sentiment.data import load_splits
from training.sentiment.encoding import token_rows
from training.sentiment.evaluate import onnx_predict
from training.sentiment.model import load_tokenizer
from training.sentiment.quantize import (
    INT8_FILE,
    Int8Gate,
    encoder_layers,
    gated_int8_export,
    head_nodes,
    int8_skipped_because,
    judge,
    kept_float,
    quantize_encoder,
    skipped_int8,
)


def test_tiny_export_writes_a_gated_int8_that_the_manifest_lists(sentiment_artifacts):
    manifest = json.loads((sentiment_artifacts / "manifest.json").read_text())
    report = manifest["metrics"]["int8"]
    assert report["written"] and report["refused_because"] == []
    assert INT8_FILE in manifest["files"] and (sentiment_artifacts / INT8_FILE).is_file()
    # The gate is a choice: it read the selection split's IMDB reviews, never the test split's.
    selection = load_splits(TINY.seed).validation.sample(TINY.int8_selection_size, TINY.seed + 1)
    assert report["split"] == "selection"
    assert report["reviews"] == int((selection.source == "imdb").sum())
    assert report["fp32"]["accuracy"] - report["int8"]["accuracy"] <= Int8Gate().max_accuracy_drop
    # The test split, read once after the gate passed: the figures reported beside the gate's.
    assert report["test"]["reviews"] == manifest["metrics"]["test_size_imdb"]
    assert set(report["test"]) == {"reviews", "fp32", "int8"}
    assert report["test"]["fp32"]["accuracy"] == pytest.approx(
        manifest["metrics"]["test_accuracy_imdb"], abs=1e-5
    )
    assert report["size_mb"] < report["fp32_size_mb"]  # int8 MatMul weights, float embeddings


def test_the_layer_whose_quantization_moves_the_answers_most_stays_float():
    assert kept_float({"0": 7e-4, "1": 6e-4, "2": 6.1e-4, "3": 4e-4, "4": 2e-5}, 1) == ["0"]
    assert kept_float({"0": 1e-4, "1": 6e-4, "2": 6.1e-4}, 2) == ["1", "2"]
    assert kept_float({"10": 1e-4, "9": 6e-4, "2": 6.1e-4}, 2) == ["2", "9"]  # layer order
    assert kept_float({"0": 1e-4, "1": 2e-4}, 5) == ["1"]  # never every layer
    assert kept_float({"0": 1e-4}, 1) == []  # a one-layer encoder stays all int8
    assert kept_float({"0": 1e-4, "1": 2e-4}, 0) == []


def test_the_tiny_export_measured_its_one_layer_and_kept_none_float(sentiment_artifacts):
    report = json.loads((sentiment_artifacts / "manifest.json").read_text())["metrics"]["int8"]
    layers = encoder_layers(onnx.load(str(sentiment_artifacts / "model.onnx")))
    # Each encoder layer quantized alone, measured on training reviews (no split a figure reads).
    assert sorted(report["sensitivity"]) == sorted(layers) == ["0"]
    assert report["sensitivity"]["0"] > 0 and report["probe_reviews"] > 0
    assert report["float_layers"] == []


def test_a_layer_kept_float_keeps_the_fp32_graphs_matmuls(sentiment_artifacts, tmp_path):
    layers = encoder_layers(onnx.load(str(sentiment_artifacts / "model.onnx")))
    assert layers["0"]
    quantize_encoder(sentiment_artifacts / "model.onnx", tmp_path / "kept.onnx", keep_float=["0"])
    graph = onnx.load(str(tmp_path / "kept.onnx")).graph
    assert not any(n.op_type == "MatMulInteger" and "/layer.0/" in n.name for n in graph.node)
    assert set(layers["0"]) <= {n.name for n in graph.node if n.op_type == "MatMul"}
    quantize_encoder(sentiment_artifacts / "model.onnx", tmp_path / "all.onnx")
    graph = onnx.load(str(tmp_path / "all.onnx")).graph
    assert any(n.op_type == "MatMulInteger" and "/layer.0/" in n.name for n in graph.node)


def test_only_the_encoder_is_quantized_the_head_stays_float(sentiment_artifacts):
    graph = onnx.load(str(sentiment_artifacts / INT8_FILE)).graph
    ops = {n.op_type for n in graph.node}
    assert {"MatMulInteger", "DynamicQuantizeLinear"} <= ops
    assert "Gather" in ops  # the embedding lookup stays float (per-tensor int8 there cost accuracy)
    head = head_nodes(onnx.load(str(sentiment_artifacts / "model.onnx")))
    assert head and all(n.startswith("/head/") for n in head)
    head_ops = {n.op_type for n in graph.node if n.name.startswith("/head/")}
    assert "MatMulInteger" not in head_ops and head_ops & {"Gemm", "MatMul"}


@pytest.fixture
def tiny_copy(sentiment_artifacts, tmp_path) -> Path:
    out = tmp_path / "art"
    shutil.copytree(sentiment_artifacts, out)
    return out


def _tiny_test_split():
    # The pipeline's own test sample for TINY, so the rows are reviews the model was gated on.
    return load_splits(TINY.seed).test.sample(TINY.test_size, TINY.seed + 2)


def test_an_int8_that_misses_fp32_accuracy_is_refused_and_not_written(tiny_copy, capsys):
    test = _tiny_test_split()
    rows = token_rows(load_tokenizer(), test.text, TINY.max_length, TINY.head_tokens)
    # An fp32 reference that is right on every review: the real int8 candidate is far below it.
    perfect = np.eye(2, dtype=np.float32)[test.label] * 10
    report = gated_int8_export(tiny_copy, rows, test, perfect, 1.0, threads=1)
    assert not report["written"] and report["size_mb"] is None
    assert not (tiny_copy / INT8_FILE).exists()  # and the stale one from the fixture is gone
    assert (
        "accuracy" in report["refused_because"][0]
        and "points below" in report["refused_because"][0]
    )
    assert "int8 export refused" in capsys.readouterr().err
    assert report["fp32"]["accuracy"] == 1.0


def test_int8_logits_follow_fp32_on_the_tiny_test_reviews(sentiment_artifacts):
    test = _tiny_test_split()
    rows = token_rows(load_tokenizer(), test.text[:24], TINY.max_length, TINY.head_tokens)
    fp32 = onnx_predict(sentiment_artifacts / "model.onnx", rows, threads=1).logits
    int8 = onnx_predict(sentiment_artifacts / INT8_FILE, rows, threads=2).logits
    diff = np.abs(fp32 - int8).max()
    assert 0 < diff < 0.1  # quantized (not a copy of fp32), and close


@pytest.mark.parametrize(
    ("int8", "refused"),
    [
        ({"accuracy": 0.8951, "ece_after": 0.019}, []),
        ({"accuracy": 0.8949, "ece_after": 0.019}, ["accuracy"]),
        ({"accuracy": 0.90, "ece_after": 0.0201}, ["ECE"]),  # at most 0.02 itself
        ({"accuracy": 0.85, "ece_after": 0.05}, ["accuracy", "ECE", "ECE"]),
    ],
)
def test_gate_allows_half_a_point_of_accuracy_and_an_ece_of_0_02(int8, refused):
    fp32 = {"accuracy": 0.90, "ece_after": 0.015}
    reasons = judge(fp32, int8, Int8Gate())
    assert ["ECE" if r.startswith("ECE") else "accuracy" for r in reasons] == refused


def test_gate_still_refuses_an_ece_rise_of_more_than_0_01():
    reasons = judge(
        {"accuracy": 0.9, "ece_after": 0.001}, {"accuracy": 0.9, "ece_after": 0.0115}, Int8Gate()
    )
    assert len(reasons) == 1 and "above fp32" in reasons[0]


def test_onnx_int8_runtime_serves_the_int8_file_with_the_float_head(sentiment_artifacts):
    fp32 = SentimentPredictor.from_dir(sentiment_artifacts, {"runtime": "onnx", "threads": 1})
    int8 = SentimentPredictor.from_dir(sentiment_artifacts, {"runtime": "onnx-int8", "threads": 1})
    assert Path(int8.runtime.path).name == INT8_FILE  # and the head self-check passed at load
    texts = ["a wonderful, moving film", "a dull and pointless movie"]
    for a, b in zip(fp32.predict(texts), int8.predict(texts), strict=True):
        assert abs(a["probabilities"]["positive"] - b["probabilities"]["positive"]) < 0.05


@pytest.mark.parametrize(
    ("runtime", "kept", "left_out"),
    [
        ("onnx-int8", INT8_FILE, {"model.onnx", "model.pt"}),
        ("onnx", "model.onnx", {INT8_FILE, "model.pt"}),
        ("auto", "model.onnx", {"model.pt"}),
        ("auto", INT8_FILE, {"model.pt"}),
    ],
)
def test_archive_carries_only_the_configured_onnx_file(
    sentiment_artifacts, tmp_path, runtime, kept, left_out
):
    stage_archive("sentiment", sentiment_artifacts, tmp_path / "stage", runtime)
    files = {p.name for p in (tmp_path / "stage" / "extra").iterdir()}
    assert kept in files and not (left_out & files)


def test_the_evaluation_runs_model_onnx_alone_in_row_order_on_any_number_of_workers(
    sentiment_artifacts,
):
    """The pipeline's CPU evaluation (onnx_predict): each text alone, results in row order, the
    same bits whatever the worker count, and equal to the parity-checked TorchScript export."""
    import torch

    test = _tiny_test_split()
    rows = token_rows(load_tokenizer(), test.text[:40], TINY.max_length, TINY.head_tokens)
    one = onnx_predict(sentiment_artifacts / "model.onnx", rows, threads=1)
    three = onnx_predict(sentiment_artifacts / "model.onnx", rows, threads=3)
    assert np.array_equal(one.logits, three.logits) and np.array_equal(one.features, three.features)
    assert one.logits.shape == (40, 2) and one.features.shape[0] == 40
    scripted = torch.jit.load(str(sentiment_artifacts / "model.pt"))
    for i in (0, 17, 39):  # eager-equivalent answers for texts of different lengths, in order
        ids = torch.tensor([rows[i]])
        logits, features = scripted(ids, torch.ones_like(ids))
        np.testing.assert_allclose(one.logits[i], logits[0].detach().numpy(), atol=1e-4)
        np.testing.assert_allclose(one.features[i], features[0].detach().numpy(), atol=1e-4)


AVX2 = {"avx2", "fma", "sse4_2"}
VNNI = AVX2 | {"avx512f", "avx512_vnni"}


def test_the_default_builds_int8_only_where_auto_serves_it():
    """int8 costs the first run minutes on a CPU where `runtime: auto` would never serve it."""
    assert DEFAULT.int8 == "where-served"
    assert int8_skipped_because(DEFAULT.int8, VNNI) is None
    assert int8_skipped_because(DEFAULT.int8, AVX2 | {"avx_vnni"}) is None
    why = int8_skipped_because(DEFAULT.int8, AVX2)
    assert why and "int8 dot-product" in why and "training.sentiment.quantize" in why


def test_always_builds_int8_on_any_cpu_and_the_tests_config_asks_for_it():
    assert TINY.int8 == "always"
    assert int8_skipped_because("always", AVX2) is None
    with pytest.raises(ValueError, match="int8 policy"):
        int8_skipped_because("sometimes", VNNI)


def test_a_skipped_int8_removes_a_stale_one_and_says_why(tmp_path):
    (tmp_path / INT8_FILE).write_bytes(b"an int8 of an earlier model")
    report = skipped_int8(tmp_path, "no dot products")
    assert not (tmp_path / INT8_FILE).exists()
    assert report["written"] is False and report["skipped_because"] == "no dot products"
