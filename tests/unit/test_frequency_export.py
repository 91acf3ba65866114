"""The export: both modes, both runtimes, parity-gated, and a head that reproduces the output."""

import json

import numpy as np
import pytest

from handlers.frequency.settings import FrequencyExport
from handlers.manifest import read_manifest
from handlers.runtime import load_runtime
from handlers.uncertainty import MLPHead
from training.common.parity import ParityError
from training.frequency import export
from training.frequency.__main__ import run
from training.frequency.config import CONFIGS


def test_manifest_lists_both_modes_for_both_runtimes(frequency_artifacts):
    manifest = read_manifest(frequency_artifacts)
    assert {"model.onnx", "model.pt", "step.onnx", "step.pt", "head.npz"} <= set(manifest["files"])
    assert set(manifest["metrics"]["heldout_family"]) == {
        f"{mode}_{k}"
        for mode in ("windows", "stream")
        for k in ("median_r", "p10_r", "absent_ratio")
    }
    parity = json.loads((frequency_artifacts / "parity.json").read_text())
    for mode in ("sequence", "step"):
        assert parity[mode]["passed"] and set(parity[mode]["max_abs_diff"]) == {
            "onnx",
            "torchscript",
        }
        assert max(parity[mode]["max_abs_diff"].values()) <= export.ATOL


def test_handler_block_is_exactly_the_export_serving_reads(frequency_artifacts):
    """Training wrote the block through FrequencyExport: parsing it back loses and adds nothing."""
    h = read_manifest(frequency_artifacts)["handler"]
    export = FrequencyExport.from_block(h)
    assert export.to_block() == h
    assert export.step.files == {"onnx": "step.onnx", "torchscript": "step.pt"}


def test_head_on_graph_features_reproduces_the_graph_output(frequency_artifacts):
    handler = read_manifest(frequency_artifacts)["handler"]
    head = MLPHead.load(frequency_artifacts / "head.npz")
    x = np.zeros((3, 57, 6), dtype=np.float32)  # two lock-in products, the one-hot selector
    x[..., :2] = np.random.default_rng(0).uniform(-1, 1, (3, 57, 2))
    x[:, :, 3] = 1.0
    for kind in ("onnx", "torchscript"):
        rt = load_runtime(
            kind, frequency_artifacts, handler["sequence"]["inputs"], handler["sequence"]["outputs"]
        )
        out = rt.run({"signal": x})
        # (I, Q) = the head over the hidden states: what the band's dropout terms are built on
        np.testing.assert_allclose(head.forward(out["features"]), out["output"], atol=1e-5)


def test_failed_parity_gate_writes_no_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "ATOL", -1.0)  # every export now "differs" from eager
    with pytest.raises(ParityError):
        run(tmp_path, CONFIGS["tiny"], plots=False)
    assert not (tmp_path / "manifest.json").exists()
