"""Runtimes on accelerators: no silent CPU fallback on CUDA (a fake provider list stands in for a
GPU), MPS where TorchServe hands out a device on a Mac, ORT spinning off, fp16 with its own gate."""

from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch

from handlers.errors import ArchiveError
from handlers.runtime import (
    OnnxRuntime,
    device_from_properties,
    load_runtime,
    onnx_providers,
    resolve_runtime,
)
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
    ],
)
def test_worker_device_follows_gpu_id_to_cuda_or_mps(monkeypatch, gpu_id, cuda, mps, want):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4 if cuda else 0)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert device_from_properties({"gpu_id": gpu_id}, environ={}) == want


def _no_cuda(monkeypatch, reason="The NVIDIA driver on your system is too old (found version 535)"):
    """torch as a CUDA build on a node whose driver it cannot use."""

    def init():
        raise RuntimeError(reason)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "init", init)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)


def test_gpu_id_without_cuda_runs_on_the_cpu_only_when_no_gpu_is_required(monkeypatch, caplog):
    """A CPU torch on a machine where TorchServe counted GPUs (a laptop's `make serve`): CPU, and
    the log says so. Replaces the old row (gpu_id 0, no CUDA, no MPS) -> "cpu" that held for
    every deployment, GPU replicas included: the silent fallback."""
    _no_cuda(monkeypatch)
    with caplog.at_level("WARNING", logger="handlers.runtime"):
        assert device_from_properties({"gpu_id": 0}, environ={}) == "cpu"
    assert "runs on the CPU" in caplog.text and "too old" in caplog.text


@pytest.mark.parametrize("gpu_id", [0, 3])
def test_a_gpu_replica_without_cuda_fails_to_load_with_the_driver_reason(monkeypatch, gpu_id):
    _no_cuda(monkeypatch)
    with pytest.raises(ArchiveError, match=r"^GPU unavailable: TS_REQUIRE_GPU=1 .*too old"):
        device_from_properties({"gpu_id": gpu_id}, environ={"TS_REQUIRE_GPU": "1"})


def test_a_gpu_replica_on_a_cpu_build_of_torch_says_so(monkeypatch):
    _no_cuda(monkeypatch)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(ArchiveError, match="CUDA is unavailable: torch .* is a CPU build"):
        device_from_properties({"gpu_id": 0}, environ={"TS_REQUIRE_GPU": "true"})


def test_a_gpu_replica_that_torchserve_gave_no_gpu_fails_to_load(monkeypatch):
    """No NVIDIA runtime in the container: no nvidia-smi, TorchServe counts no GPU and hands out
    no gpu_id at all, even with CUDA visible to torch."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ArchiveError, match="GPU unavailable: .*no gpu_id.*runtimeClassName"):
        device_from_properties({"gpu_id": None}, environ={"TS_REQUIRE_GPU": "1"})
    assert device_from_properties({"gpu_id": None}, environ={"TS_REQUIRE_GPU": "0"}) == "cpu"


def test_a_gpu_id_past_the_visible_devices_fails_to_load(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ArchiveError, match="gpu_id 1 but torch sees 1 CUDA device"):
        device_from_properties({"gpu_id": 1}, environ={})


def test_the_requirement_comes_from_the_environment(monkeypatch):
    _no_cuda(monkeypatch)
    monkeypatch.setenv("TS_REQUIRE_GPU", "1")
    with pytest.raises(ArchiveError, match="GPU unavailable"):
        device_from_properties({"gpu_id": 0})


class _CudaLookingSession(onnxruntime.InferenceSession):
    """A real CPU session that reports the CUDA provider, as onnxruntime-gpu's does on a GPU."""

    created: list = []

    def __init__(self, path, sess_options=None, providers=None, **kwargs):
        type(self).created.append((providers, kwargs))
        super().__init__(path, sess_options=sess_options, providers=["CPUExecutionProvider"])

    def get_providers(self):
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]


def test_cuda_sessions_never_fall_back_to_the_cpu_at_run_time(sentiment_artifacts, monkeypatch):
    """onnxruntime's sessions keep enable_fallback: an execution-provider failure in run() moves
    the session to the CPU for good. A CUDA session has it off, from its construction on."""
    fake = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: fake)
    monkeypatch.setattr(onnxruntime, "InferenceSession", _CudaLookingSession)
    _CudaLookingSession.created.clear()
    rt = load_runtime("onnx", sentiment_artifacts, IN, OUT, device="cuda:0")
    assert rt.device == "cuda:0" and rt.providers[0] == "CUDAExecutionProvider"
    assert rt._session._enable_fallback is False
    assert _CudaLookingSession.created[-1][1] == {"enable_fallback": 0}
    cpu = load_runtime("onnx", sentiment_artifacts, IN, OUT)
    assert cpu._session._enable_fallback is True  # the CPU has nothing to fall back to


def test_a_cuda_session_that_cannot_be_built_fails_to_load(sentiment_artifacts, monkeypatch):
    fake = ["CUDAExecutionProvider", "CPUExecutionProvider"]

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA failure 35: CUDA driver version is insufficient for CUDA runtime")

    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: fake)
    monkeypatch.setattr(onnxruntime, "InferenceSession", broken)
    with pytest.raises(ArchiveError, match="^GPU unavailable: .*driver version is insufficient"):
        load_runtime("onnx", sentiment_artifacts, IN, OUT, device="cuda:0")


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


@pytest.mark.parametrize("key", ["fp16", "intra_op_spinning", "share_cores"])
def test_switches_must_be_booleans(sentiment_artifacts, key):
    import json

    manifest = json.loads((sentiment_artifacts / "manifest.json").read_text())
    with pytest.raises(ArchiveError, match=f"handler.{key} must be true or false"):
        parse_settings(manifest, {key: "yes"})
    assert getattr(parse_settings(manifest, {key: True}), key) is True


def test_the_torchscript_a_cpu_exports_names_no_device(sentiment_artifacts):
    """Measured on an H200: transformers' mask code creates index tensors on the device it runs
    on, and a trace records that as `torch.device("cpu")`, so the model.pt a CPU training run
    exported failed on cuda:0. The model now hands the encoder a ready 4D mask
    (training/sentiment/masking.py): the trace names no device and a GPU worker loads it."""
    from handlers.runtime import pinned_devices

    # A GPU worker refuses a trace exactly when this names "cpu"
    # (test_a_torchscript_that_pins_the_cpu_is_refused_on_cuda_at_load_with_the_reason).
    assert pinned_devices(torch.jit.load(str(sentiment_artifacts / "model.pt"))) == set()


def test_the_additive_mask_gives_the_encoders_own_numbers():
    """The 4D mask is the one transformers builds from the 2D mask: the encoder's output is
    bitwise the same either way, padding included."""
    from training.sentiment.config import TINY
    from training.sentiment.masking import additive_mask
    from training.sentiment.model import build_model

    encoder = build_model(TINY).eval().encoder
    ids = torch.randint(1000, 30000, (3, 20), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 20, dtype=torch.long)
    mask[1, 12:], mask[2, 3:] = 0, 0
    with torch.no_grad():
        theirs = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        ours = encoder(input_ids=ids, attention_mask=additive_mask(mask)).last_hidden_state
    assert torch.equal(theirs, ours)


def test_a_torchscript_that_pins_the_cpu_is_refused_on_cuda_at_load_with_the_reason(tmp_path):
    """An archive exported before the 4D mask (or any trace that recorded a CPU device) is refused
    by a GPU worker at load, naming the way out, instead of failing its first request."""
    from handlers.runtime import TorchScriptRuntime, pinned_devices

    class Positions(torch.nn.Module):
        def forward(self, ids, mask):
            return (ids * mask + torch.arange(ids.shape[1], device=ids.device)).float()

    example = (torch.ones(2, 4, dtype=torch.long), torch.ones(2, 4, dtype=torch.long))
    torch.jit.trace(Positions(), example, check_trace=False).save(str(tmp_path / "model.pt"))
    assert "cpu" in pinned_devices(torch.jit.load(str(tmp_path / "model.pt")))
    with pytest.raises(ArchiveError, match="traced on the CPU.*onnxruntime-gpu"):
        TorchScriptRuntime(
            tmp_path / "model.pt", ("input_ids", "attention_mask"), ("logits",), "cuda:0"
        )


def test_the_shipped_gpu_runtime_is_one_a_cpu_training_run_produces(
    sentiment_artifacts, monkeypatch
):
    """What GPU replicas serve is the archive's model-config runtime (the GPU overlay changes the
    image, not the archive). It is ONNX: the graph `make train` exports on a CPU-only machine
    carries no device and runs under onnxruntime-gpu's CUDA provider (faked here), answering as
    on the CPU."""
    import yaml

    root = Path(__file__).resolve().parents[2]
    config = yaml.safe_load((root / "handlers/sentiment/model-config.yaml").read_text())["handler"]
    # auto: the gated int8 on a CPU, fp32 ONNX on a GPU (int8 ONNX would run its quantised ops on
    # the CPU there).
    assert config["runtime"] == "auto"
    assert resolve_runtime("auto", sentiment_artifacts, "cpu", {"avx512_vnni"})[0] == "onnx-int8"
    # The same batching on both sides (a GPU runs its batch as one padded call; the CPU default
    # runs texts alone, which differs from a batch of two in the last float bits): only the
    # device differs.
    cpu = SentimentPredictor.from_dir(
        sentiment_artifacts, config | {"runtime": "onnx", "texts_alone": False}
    )
    fake = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setattr(onnxruntime, "get_available_providers", lambda: fake)
    monkeypatch.setattr(onnxruntime, "InferenceSession", _CudaLookingSession)
    gpu = SentimentPredictor.from_dir(sentiment_artifacts, config, device="cuda:0")
    assert gpu.runtime_kind == "onnx" and Path(gpu.runtime.path).name == "model.onnx"
    assert gpu.runtime.device == "cuda:0" and gpu.runtime._session._enable_fallback is False
    texts = ["a wonderful, moving film", "a dull and pointless movie"]
    assert gpu.predict(texts) == cpu.predict(texts)


def test_the_gpu_checks_fp16_gate_is_the_servings():
    # bench/gpu_check.py reads the gate through the registry on a bare GPU machine; it had read a
    # dataclass field the settings no longer have and failed before checking anything.
    from handlers.sentiment.settings import SentimentSettings
    from tools.registry import get

    assert get("sentiment").samples().fp16_atol() == SentimentSettings().fp16_atol == 0.05
