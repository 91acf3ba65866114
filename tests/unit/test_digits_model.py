"""The digits model end to end in-process: what training writes (manifest, parity, metrics), the
parity gate, the predictor and the TorchServe handler over tiny trained models, and the same
handler serving a ResNet-shaped export (other input size and channels) with no code change."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from ts.context import Context, RequestProcessor
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl

import training.digits.__main__ as digits_main
from handlers import budget
from handlers.digits.model import DigitsModel
from handlers.digits.predict import DigitsPredictor
from handlers.digits_handler import DigitsHandler
from handlers.errors import ArchiveError
from handlers.kits.image.classifier import ImageAnswer as DigitsAnswer
from handlers.kits.image.decode import ImageRequest
from handlers.kits.image.reading import model_batch
from handlers.kits.image.settings import ImageExport
from handlers.manifest import read_manifest
from handlers.runtime import load_runtime
from tests.unit.test_digits_codec import png_claiming
from training.common.parity import ParityCase, ParityError, check_parity
from training.digits import export as digits_export
from training.digits.config import CONFIGS
from training.digits.data import load_splits
from training.digits.model import build_model
from training.digits.train import export_block, outputs_of

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"runtime": "onnx", "threads": 1, "max_batch_images": 40}
JSON = "application/json"


@pytest.fixture(scope="module")
def test_split():
    return load_splits()["test"]


@pytest.fixture(scope="module", params=["cnn", "resnet"])
def artifacts(request) -> Path:
    """Both tiny exports: the one handler must serve each."""
    name = "digits_artifacts" if request.param == "cnn" else "digits_resnet_artifacts"
    return request.getfixturevalue(name)


def make_context(model_dir: Path, name: str = "digits") -> Context:
    return Context(
        name, str(model_dir), {"model": {"modelName": name}}, 8, None, "0.12.0",
        metrics=MetricsCacheYamlImpl(str(ROOT / "metrics.yaml")),
        model_yaml_config={"batchSize": 8, "handler": CONFIG},
    )  # fmt: skip


def run_batch(handler: DigitsHandler, requests: list[tuple[object, str]]):
    """[(body, content type)] → [(status, parsed JSON body, response headers)], as TorchServe."""
    ctx = make_context(Path("unused"))
    ctx.request_processor = [RequestProcessor({"body": {"content-type": c}}) for _, c in requests]
    ctx.request_ids = {i: f"req-{i}" for i in range(len(requests))}
    out = handler.handle([{"body": b} for b, _ in requests], ctx)
    return [
        (ctx.get_response_status(i)[0], json.loads(body), ctx.get_response_headers(i))
        for i, body in enumerate(out)
    ]


def png_of(grey: np.ndarray, scale: int = 4) -> bytes:
    im = Image.fromarray((grey * 255).round().astype(np.uint8)).resize(
        (grey.shape[1] * scale, grey.shape[0] * scale), Image.Resampling.NEAREST
    )
    buf = io.BytesIO()
    im.convert("RGB").save(buf, "PNG")
    return buf.getvalue()


def grid_of(grey: np.ndarray) -> list[list[float]]:
    return (grey * 16).round(4).tolist()


def test_training_writes_a_checked_export_with_its_handler_block(artifacts):
    manifest = read_manifest(artifacts)
    assert manifest["model"] == "digits"
    assert set(manifest["files"]) == {"model.pt", "model.onnx", "head.npz"}
    export = ImageExport.from_block(manifest["handler"])
    assert export.to_block() == manifest["handler"]  # one definition both ways
    assert export.input_shape == {"cnn": (1, 8, 8), "resnet": (3, 16, 16)}[export.arch]
    assert export.temperature > 0 and export.classes == tuple("0123456789")
    assert (export.output_name, export.features_name, export.head) == (
        "logits",
        "features",
        "head.npz",
    )
    parity = json.loads((artifacts / "parity.json").read_text())
    assert parity["passed"] and max(parity["max_abs_diff"].values()) <= digits_export.ATOL
    assert {"onnx", "torchscript", "mlp_head"} <= set(parity["max_abs_diff"])
    metrics = json.loads((artifacts / "metrics.json").read_text())
    assert metrics["test"]["images"] == 297 and 0 <= metrics["test"]["accuracy"] <= 1
    u = metrics["uncertainty"]
    assert set(u["non_digits"]) == {"blank", "solid", "noise", "letters"}
    assert u["outlier_exposure"]["held_out_kinds"] == ["letters"]
    assert "letters" not in u["outlier_exposure"]["trained_kinds"]
    for measure in ("entropy", "mutual_information"):
        assert 0 <= u[f"auroc_non_digits_vs_test_{measure}"] <= 1
        assert all(measure in row for row in u["non_digits"].values())


def test_parity_gate_refuses_exports_that_differ_from_eager(tmp_path, test_split):
    export = export_block(CONFIGS["tiny"], test_split)
    torch.manual_seed(0)
    model = build_model("cnn", 1, 10, 4, 0.0).eval()
    report = digits_export.export_all(model, export, tmp_path, test_split.greys[:5])
    assert report["passed"] and {"onnx", "torchscript"} <= set(report["max_abs_diff"])
    # The saved exports held against other weights: the gate names each runtime that differs.
    other = build_model("cnn", 1, 10, 4, 0.0).eval()
    runtimes = {
        kind: load_runtime(kind, tmp_path, ("image",), ("logits", "features")).run
        for kind in ("onnx", "torchscript")
    }
    case = ParityCase("digits", {"image": model_batch(test_split.greys[:3], export)})

    def eager(inputs):
        logits, features = outputs_of(other, test_split.greys[:3], export)
        return {"logits": logits, "features": features}

    with pytest.raises(ParityError, match="onnx at digits.*torchscript at digits"):
        check_parity(eager, runtimes, [case], digits_export.ATOL)


def test_failed_parity_gate_writes_no_manifest(tmp_path, monkeypatch):
    cfg = CONFIGS["tiny"]
    untrained = build_model("cnn", 1, 10, cfg.width, 0.0).eval()
    monkeypatch.setattr(digits_main, "train", lambda *a, **k: (untrained, 0))
    monkeypatch.setattr(digits_export, "ATOL", -1.0)  # every export now "differs" from eager
    with pytest.raises(ParityError):
        digits_main.run(tmp_path, cfg, plots=False, progress=False)
    assert not (tmp_path / "manifest.json").exists()


def test_predictor_answers_match_the_eager_model_and_batching(artifacts, test_split):
    predictor = DigitsPredictor.from_dir(artifacts, CONFIG)
    greys = list(test_split.greys[:12])
    together = predictor.classify(greys)
    alone = [predictor.classify([g])[0] for g in greys]
    for a, b in zip(together, alone, strict=True):
        assert a.label == b.label
        np.testing.assert_allclose(
            list(a.probabilities.values()), list(b.probabilities.values()), atol=1e-5
        )
        # the masks are fixed at load: an image's MC-dropout spread does not depend on its batch
        for key, value in a.uncertainty().items():
            assert value == pytest.approx(b.uncertainty()[key], abs=1e-5), key
    for c in together:
        assert set(c.probabilities) == set("0123456789")
        assert abs(sum(c.probabilities.values()) - 1) < 1e-6 and c.entropy >= 0
        assert c.mutual_information >= 0 and c.std >= 0 and c.samples == 16
    assert predictor.model_info["arch"] == predictor.settings.export.arch


def test_batch_budget_refuses_past_it_with_503_and_retry_after(digits_artifacts, test_split):
    predictor = DigitsPredictor.from_dir(digits_artifacts, CONFIG)
    g = test_split.greys[0]
    big = ImageRequest((g,) * 30, many=True)
    # The model declares its budgets; the lifecycle (handlers/service.py) applies them.
    budgets = DigitsModel(predictor).budgets
    answers = predictor.predict(budget.apply([big, big, ImageRequest((g,))], budgets))
    assert isinstance(answers[0], DigitsAnswer) and len(answers[0].predictions) == 30
    assert answers[1].status == 503 and answers[1].retry_after_s
    assert isinstance(answers[2], DigitsAnswer)  # 31 images: still within 40


def test_handler_answers_json_grids_and_pngs_alike(artifacts, test_split):
    """The same handler class over either export: no code knows the architecture."""
    handler = DigitsHandler()
    handler.initialize(make_context(artifacts))
    grey = test_split.greys[5]
    grid_body = json.dumps({"image": grid_of(grey)}).encode()
    # the PNG at the grid's own size: both reach the graph as the same pixels (to 8-bit levels)
    results = run_batch(handler, [(grid_body, JSON), (png_of(grey, scale=1), "image/png")])
    (s1, by_grid, h1), (s2, by_png, _) = results
    assert s1 == s2 == 200 and h1["content-type"] == JSON
    assert set(by_grid) == {
        "label", "probabilities", "uncertainty", "polarity", "digits_found", "model"
    }  # fmt: skip
    assert by_grid["polarity"] == by_png["polarity"] == "bright_on_dark"  # the dataset's own
    assert by_grid["digits_found"] is by_png["digits_found"] is None  # 8 x 8: taken as framed
    assert set(by_grid["uncertainty"]) == {"entropy", "mutual_information", "std", "samples"}
    assert by_grid["uncertainty"]["samples"] == 16
    assert by_grid["label"] == by_png["label"]
    np.testing.assert_allclose(
        list(by_grid["probabilities"].values()), list(by_png["probabilities"].values()), atol=0.02
    )
    assert by_grid["model"]["arch"] == handler.settings.export.arch
    want = handler.service.model.predictor.classify([grey])[0]
    assert by_grid["label"] == want.label


def test_bad_images_never_fail_their_batch_neighbours(digits_artifacts, test_split):
    handler = DigitsHandler()
    handler.initialize(make_context(digits_artifacts))
    good = json.dumps({"images": [grid_of(g) for g in test_split.greys[:3]]}).encode()
    batch = [
        (good, JSON),
        (png_claiming(100_000, 100_000), "image/png"),
        (png_of(test_split.greys[0])[:60], "image/png"),
        (b"just text", "image/png"),
        (b'{"image": [[NaN]]}', JSON),
        (good, JSON),
    ]
    results = run_batch(handler, batch)
    statuses = [s for s, _, _ in results]
    assert statuses == [200, 400, 400, 400, 400, 200], results
    assert [r["label"] for r in results[0][1]] == [r["label"] for r in results[5][1]]
    assert [b["kind"] for _, b, _ in results[1:5]] == [
        "too_large",
        "bad_encoding",
        "bad_encoding",
        "bad_field",
    ]


def test_a_manifest_that_misdescribes_its_graph_fails_the_load(digits_artifacts, tmp_path):
    for name in ("model.onnx", "model.pt", "head.npz"):
        (tmp_path / name).write_bytes((digits_artifacts / name).read_bytes())
    manifest = read_manifest(digits_artifacts)
    manifest["handler"] = manifest["handler"] | {
        "input_shape": [3, 16, 16],
        "mean": [0] * 3,
        "std": [1] * 3,
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArchiveError, match="graph"):
        DigitsPredictor.from_dir(tmp_path, CONFIG)


def test_the_two_architectures_differ_only_in_their_manifests(
    digits_artifacts, digits_resnet_artifacts
):
    cnn, resnet = (read_manifest(a)["handler"] for a in (digits_artifacts, digits_resnet_artifacts))
    assert (cnn["arch"], cnn["input_shape"]) == ("cnn", [1, 8, 8])
    assert (resnet["arch"], resnet["input_shape"]) == ("resnet", [3, 16, 16])
    # and both are served by one handler module whose source names neither network
    source = (ROOT / "handlers" / "digits_handler.py").read_text() + "".join(
        p.read_text() for p in (ROOT / "handlers" / "digits").glob("*.py")
    )
    for network in ("TinyResNet", "DigitsCNN", "BasicBlock", "training."):
        assert network not in source


def test_tiny_config_trains_a_resnet_with_residual_blocks():
    cfg = dataclasses.replace(CONFIGS["tiny"], arch="resnet")
    model = build_model(cfg.arch, cfg.input_shape[0], 10, cfg.width, cfg.dropout)
    assert any(type(m).__name__ == "BasicBlock" for m in model.modules())


def test_report_counts_labels_and_entropy(digits_artifacts, test_split):
    from handlers.telemetry import PREDICTIONS, UNCERTAINTY, Telemetry

    class Recorder:
        def __init__(self):
            self.names = []

        def add_metric(self, name, value, unit, idx, dims, metric_type=None):
            self.names.append(name)

    predictor = DigitsPredictor.from_dir(digits_artifacts, CONFIG)
    answers = predictor.predict([ImageRequest(tuple(test_split.greys[:3]), many=True)])
    recorder = Recorder()
    DigitsModel(predictor).report(answers, Telemetry(recorder, "digits"))
    # entropy, mutual information and std for each of the 3 images
    assert recorder.names.count(UNCERTAINTY) == 9 and PREDICTIONS in recorder.names


def test_uncertainty_is_the_same_alone_and_in_any_batch(artifacts, test_split):
    """Same image alone, first, last and in the middle of batches: identical answers."""
    predictor = DigitsPredictor.from_dir(artifacts, CONFIG)
    image = test_split.greys[7]
    others = list(test_split.greys[20:27])
    alone = predictor.classify([image])[0]
    for batch, at in (
        ([image, *others], 0),
        ([*others, image], 7),
        ([*others[:3], image, *others[3:]], 3),
    ):
        got = predictor.classify(batch)[at]
        assert got.label == alone.label
        for key, value in alone.uncertainty().items():
            assert got.uncertainty()[key] == pytest.approx(value, abs=1e-5), key
    # and the settings choose the masks: another seed, another sample count
    other = DigitsPredictor.from_dir(artifacts, CONFIG | {"mc_samples": 4, "seed": 3})
    assert other.classify([image])[0].samples == 4


def test_a_head_that_is_not_the_graphs_fails_the_load(artifacts, tmp_path):
    from handlers.uncertainty import MLPHead

    for p in artifacts.iterdir():
        if p.is_file():
            (tmp_path / p.name).write_bytes(p.read_bytes())
    head = MLPHead.load(artifacts / "head.npz")
    MLPHead(tuple(w * 2 for w in head.weights), head.biases, head.activations, head.dropout).save(
        tmp_path / "head.npz"
    )
    with pytest.raises(ArchiveError, match="head.npz"):
        DigitsPredictor.from_dir(tmp_path, CONFIG)
    (tmp_path / "head.npz").unlink()
    with pytest.raises(ArchiveError, match="head.npz"):
        DigitsPredictor.from_dir(tmp_path, CONFIG)
