"""The export parity gate: exports that differ from eager are rejected, and nothing is vouched for."""

import copy

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

import training.sentiment.pipeline as pipeline
from training.common.parity import ParityCase, ParityError, check_parity
from training.sentiment.__main__ import main
from training.sentiment.config import TINY
from training.sentiment.export import export_onnx, export_torchscript, verify_exports
from training.sentiment.model import build_model, load_tokenizer


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory):
    """An untrained TINY model exported once; tests copy what they tamper with."""
    torch.set_num_threads(2)
    model = build_model(TINY).eval()
    pad = load_tokenizer().pad_token_id
    vocab = model.encoder.config.vocab_size
    out = tmp_path_factory.mktemp("tiny_export")
    export_torchscript(model, out / "model.pt", vocab, pad)
    export_onnx(model, out / "model.onnx", vocab, pad)
    return model, out, vocab, pad


def test_faithful_export_passes_at_unseen_shapes(tiny_export):
    model, out, vocab, pad = tiny_export
    report = verify_exports(model, out, TINY.max_length, vocab, pad)
    assert report["passed"]
    names = {c["case"] for c in report["cases"]}
    assert {"batch=1 seq=3", "batch=7 seq=32", "batch=32 seq=32"} <= names
    assert set(report["max_abs_diff"]) == {"torchscript", "onnx", "mlp_head"}
    assert max(report["max_abs_diff"].values()) <= report["atol"]


def test_perturbed_torchscript_is_rejected(tiny_export, tmp_path):
    model, out, vocab, pad = tiny_export
    perturbed = copy.deepcopy(model)
    with torch.no_grad():
        perturbed.head[-1].bias.add_(1e-3)
    export_torchscript(perturbed, tmp_path / "model.pt", vocab, pad)
    (tmp_path / "model.onnx").write_bytes((out / "model.onnx").read_bytes())
    with pytest.raises(ParityError, match="torchscript") as err:
        verify_exports(model, tmp_path, TINY.max_length, vocab, pad)
    assert "onnx at" not in str(err.value)


def test_perturbed_onnx_weights_are_rejected(tiny_export, tmp_path):
    model, out, vocab, pad = tiny_export
    graph = onnx.load(str(out / "model.onnx"))
    init = max(graph.graph.initializer, key=lambda t: np.prod(t.dims))  # the word embeddings
    # Random, not constant: LayerNorm right after the embeddings would cancel a uniform shift.
    weights = numpy_helper.to_array(init).copy()
    weights += np.random.default_rng(0).normal(0, 1e-2, weights.shape).astype(np.float32)
    init.CopyFrom(numpy_helper.from_array(weights, init.name))
    onnx.save(graph, str(tmp_path / "model.onnx"))
    (tmp_path / "model.pt").write_bytes((out / "model.pt").read_bytes())
    with pytest.raises(ParityError, match="onnx"):
        verify_exports(model, tmp_path, TINY.max_length, vocab, pad)


def test_check_parity_reports_non_finite_outputs_as_failures():
    case = ParityCase("one", {"x": np.ones(3, np.float32)})

    def eager(inputs):
        return {"y": inputs["x"]}

    def broken(inputs):
        return {"y": inputs["x"] * np.nan}

    with pytest.raises(ParityError, match="broken at one"):
        check_parity(eager, {"broken": broken}, [case], atol=1e-4)


def test_training_cli_exits_non_zero_and_writes_no_manifest_when_parity_fails(
    tmp_path, monkeypatch, capsys
):
    def sabotaged_torchscript(model, path, vocab_size, pad_token_id):
        bad = copy.deepcopy(model)
        with torch.no_grad():
            bad.head[-1].weight.mul_(1.01)
        export_torchscript(bad, path, vocab_size, pad_token_id)

    monkeypatch.setattr(pipeline, "export_torchscript", sabotaged_torchscript)
    (tmp_path / "manifest.json").write_text("{}")  # a stale one from an earlier run
    assert main(["--out", str(tmp_path), "--config", "tiny"]) == 1
    assert not (tmp_path / "manifest.json").exists()
    assert "export rejected" in capsys.readouterr().err
