"""Runtimes on accelerators: no silent CPU fallback on CUDA (a fake provider list stands in for a
GPU), MPS where TorchServe hands out a device on a Mac, ORT spinning off, fp16 with its own gate."""

import numpy as np
import onnxruntime
import pytest
import torch

from handlers.errors import ArchiveError
from handlers.runtime import OnnxRuntime, device_from_properties, load_runtime, onnx_providers
from handlers.sentiment.predict import SentimentPredictor
from handlers.sentiment.settings import parse_settings

IN, OUT = ("input_ids", "attention_mask"), ("logits", "features")


def test_cuda_device_gets_the_cuda_provider_on_its_own_gpu():
    providers = onnx_providers("cuda:1", ["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert providers == [("CUDAExecutionProvider", {"device_id": 1}), "CPUExecutionProvider"]
    assert onnx_providers("cpu", ["CUDAExecutionProvider"]) == ["CPUExecutionProvider"]


def test_cuda_device_with_a_cpu_only_onnxruntime_fails_at_load(sentiment_artifacts, monkeypatch):
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: ["CPUExecutionProvider"])
    with pytest.raises(ArchiveError, match="onnxruntime offers only.*onnxruntime-gpu"):
        load_runtime("onnx", sentiment_artifacts, IN, OUT, device="cuda:0")


def test_cuda_session_that_lands_on_the_cpu_fails_at_load(sentiment_artifacts, monkeypatch):
    # onnxruntime-gpu without working CUDA libraries lists the provider, then builds a CPU session:
    # the CPU build given the CUDA provider does exactly that.
    fake = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: fake)
    with pytest.raises(ArchiveError, match="refusing to serve a GPU model on the CPU"):
        load_runtime("onnx-int8", sentiment_artifacts, IN, OUT, device="cuda:0")


def test_cpu_session_reports_its_providers_and_does_not_spin(sentiment_artifacts):
    rt = load_runtime("onnx", sentiment_artifacts, IN, OUT, threads=1)
    assert isinstance(rt, OnnxRuntime) and rt.providers == ("CPUExecutionProvider",)
    assert rt.options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    spin = load_runtime("onnx", sentiment_artifacts, IN, OUT, threads=1, spinning=True)
    assert spin.options.get_session_config_entry("session.intra_op.allow_spinning") == "1"


def test_onnx_on_mps_says_it_runs_on_the_cpu(sentiment_artifacts):
    assert load_runtime("onnx", sentiment_artifacts, IN, OUT, device="mps").device == "cpu"


@pytest.mark.parametrize(
    ("gpu_id", "cuda", "mps", "want"),
    [
        (0, False, True, "mps"),
        (None, False, True, "cpu"),
        (2, True, False, "cuda:2"),
        (0, False, False, "cpu"),
    ],
)
def test_worker_device_follows_gpu_id_to_cuda_or_mps(monkeypatch, gpu_id, cuda, mps, want):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert device_from_properties({"gpu_id": gpu_id}) == want


def test_fp16_torchscript_passes_its_gate_and_answers_like_fp32(sentiment_artifacts):
    # CPU autocast float16 stands in for the GPU here; the gate and the code path are the same.
    fp32 = SentimentPredictor.from_dir(sentiment_artifacts, {"runtime": "torchscript"})
    fp16 = SentimentPredictor.from_dir(
        sentiment_artifacts, {"runtime": "torchscript", "fp16": True}
    )
    assert 0 < fp16.fp16_max_abs_diff <= fp16.settings.fp16_atol
    texts = ["a wonderful, moving film", "a dull and pointless movie"]
    a, b = fp32.predict(texts), fp16.predict(texts)
    assert [x["label"] for x in a] == [x["label"] for x in b]
    np.testing.assert_allclose(
        [x["probabilities"]["positive"] for x in a],
        [x["probabilities"]["positive"] for x in b],
        atol=0.02,
    )


def test_fp16_that_misses_its_gate_fails_the_worker_at_load(sentiment_artifacts):
    config = {"runtime": "torchscript", "fp16": True, "fp16_atol": 1e-9}
    with pytest.raises(ArchiveError, match="fp16 parity gate failed.*fp16: false"):
        SentimentPredictor.from_dir(sentiment_artifacts, config)


def test_fp16_is_refused_for_onnx_runtimes(sentiment_artifacts):
    with pytest.raises(ArchiveError, match="fp16 is a TorchScript option"):
        SentimentPredictor.from_dir(sentiment_artifacts, {"runtime": "onnx-int8", "fp16": True})


@pytest.mark.parametrize("key", ["fp16", "intra_op_spinning"])
def test_switches_must_be_booleans(sentiment_artifacts, key):
    import json

    manifest = json.loads((sentiment_artifacts / "manifest.json").read_text())
    with pytest.raises(ArchiveError, match=f"handler.{key} must be true or false"):
        parse_settings(manifest, {key: "yes"})
    assert getattr(parse_settings(manifest, {key: True}), key) is True


def test_cpu_traced_torchscript_is_refused_on_cuda_at_load_with_the_reason(sentiment_artifacts):
    """Measured on an H200: the encoder's trace hard-codes CPU tensors (transformers' mask code),
    so the exported model.pt fails on cuda:0 with a device mismatch. The worker refuses it at load
    instead, naming the way out (ONNX with onnxruntime-gpu)."""
    from handlers.runtime import TorchScriptRuntime, pinned_devices

    assert "cpu" in pinned_devices(torch.jit.load(str(sentiment_artifacts / "model.pt")))
    with pytest.raises(ArchiveError, match="traced on the CPU.*onnxruntime-gpu"):
        TorchScriptRuntime(
            sentiment_artifacts / "model.pt", ("input_ids", "attention_mask"), ("logits",), "cuda:0"
        )
