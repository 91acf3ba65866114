"""The tabular model end to end in process: its training (tiny and default configs, seconds),
the schema and figures it writes, its quality floor, calibration and out-of-range uncertainty,
and its serving code through ModelService on the exported runtime."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from handlers.errors import ArchiveError, BadField
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config
from tests.unit.test_tabular_kit import assert_bad_inputs_refused
from tools import registry

ROOT = Path(__file__).resolve().parents[2]
SERVING_LINES = 250
"""The tabular model's own serving code, non-blank lines (handlers/tabular/, its handler file)."""


@pytest.fixture(scope="module")
def service(tabular_artifacts) -> ModelService:
    return ModelService.from_dir(tabular_artifacts, "tabular", handler_config("tabular"))


def ask(service: ModelService, body, ctype: str = "application/json", explain: bool = False):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": ctype} | ({"explain": "true"} if explain else {})
    [reply] = service.handle_batch([Request(data, headers)])
    return json.loads(reply.body) if hasattr(reply, "body") else reply


def example() -> dict:
    return registry.get("tabular").example()


def test_training_writes_the_feature_schema_into_the_manifest(tabular_artifacts):
    manifest = json.loads((tabular_artifacts / "manifest.json").read_text())
    schema = manifest["handler"]["schema"]
    assert len(schema["features"]) == 30
    assert all(f["type"] == "number" and f["required"] for f in schema["features"])
    assert all(f["low"] <= f["mean"] <= f["high"] for f in schema["features"])
    assert set(example()) == {f["name"] for f in schema["features"]}
    assert set(manifest["files"]) == {"model.pt", "model.onnx", "head.npz", "distance.npz"}
    metrics = json.loads((tabular_artifacts / "metrics.json").read_text())
    assert {"ece_before", "ece_after"} <= set(metrics["test"])
    assert metrics["quality_floors"] == {}  # tiny: its floor is off


def test_the_default_recipe_holds_its_floor_and_calibrates(tabular_default_artifacts):
    metrics = json.loads((tabular_default_artifacts / "metrics.json").read_text())
    floor = metrics["quality_floors"]["test_accuracy"]
    assert floor["floor"] == 0.90 and floor["value"] >= 0.95
    assert floor["margin"] > 0  # the floor sits below the figure's 95 % interval
    assert metrics["train_seconds"] < 120  # seconds, not minutes (2 shared cores)
    assert metrics["test"]["ece_after"] <= 0.06
    # The temperature is the validation split's NLL minimum: T=1 is never better there.
    from handlers.kits.tabular import Schema
    from training.common.calibration import nll
    from training.tabular.data import load_splits

    manifest = json.loads((tabular_default_artifacts / "manifest.json").read_text())
    service = ModelService.from_dir(tabular_default_artifacts, "tabular", {})
    val = load_splits()["val"]
    schema = Schema.from_block(manifest["handler"]["schema"])
    logits, _ = service.model._forward(schema.encode(val.records))
    t = manifest["handler"]["temperature"]
    assert nll(logits, val.labels, t) <= nll(logits, val.labels, 1.0) + 1e-9


def test_a_run_below_its_floor_exports_nothing(tmp_path):
    from training.common.floors import QualityError
    from training.tabular.__main__ import run
    from training.tabular.config import CONFIGS

    cfg = dataclasses.replace(CONFIGS["tiny"], min_test_accuracy=1.01)
    with pytest.raises(QualityError, match="held-out test accuracy"):
        run(tmp_path, cfg, plots=False, progress=False)
    assert not (tmp_path / "manifest.json").exists() and not (tmp_path / "model.onnx").exists()


def test_records_far_outside_the_training_ranges_are_more_uncertain(tabular_default_artifacts):
    """Served answers (the ONNX export, head.npz's fixed masks) for the held-out test records, and
    the same records with one feature ten ranges past the largest value training saw."""
    from training.tabular.__main__ import far_outside
    from training.tabular.data import load_splits

    service = ModelService.from_dir(tabular_default_artifacts, "tabular", {})
    test = load_splits()["test"]
    inside = ask(service, {"records": test.records})
    outside = ask(service, {"records": far_outside(test, service.model.schema)})
    e_in = np.array([a["uncertainty"]["entropy"] for a in inside])
    e_out = np.array([a["uncertainty"]["entropy"] for a in outside])
    assert e_out.mean() > 2 * e_in.mean()
    assert np.mean(e_out[:, None] > e_in[None, :]) > 0.8  # AUROC of entropy, far vs in range
    assert all(a["out_of_range"] for a in outside)
    assert sum(bool(a["out_of_range"]) for a in inside) < len(inside) / 4


def test_one_record_many_and_csv_answer_alike(service):
    record = example()
    one = ask(service, record)
    assert set(one) == {"label", "probabilities", "uncertainty", "out_of_range", "distance",
                        "out_of_distribution", "model"}  # fmt: skip
    assert one["label"] in ("malignant", "benign") and one["model"]["name"] == "tabular"
    assert sum(one["probabilities"].values()) == pytest.approx(1.0)
    many = ask(service, {"records": [record, record]})
    header = ",".join(f'"{k}"' for k in record)
    csv = ask(service, f"{header}\n{','.join(map(repr, record.values()))}\n".encode(), "text/csv")
    assert many == [one, one] and csv == [one]


def test_the_kits_bad_inputs_are_refused_by_the_model(service):
    assert_bad_inputs_refused(service.model.parse, service.model.schema, example())


def test_a_bad_record_in_a_batch_leaves_its_neighbours_answered(service):
    good = json.dumps(example()).encode()
    bad = json.dumps(example() | {"mean radius": "big"}).encode()
    h = {"Content-Type": "application/json"}
    results = service.handle_batch([Request(good, h), Request(bad, h), Request(good, h)])
    assert isinstance(results[1], BadField) and "'mean radius'" in results[1].reason
    assert results[0].body == results[2].body == json.dumps(ask(service, example()))


def test_explanations_name_every_feature(service):
    answer = ask(service, example(), explain=True)
    assert set(answer["attributions"]) == set(example())
    assert answer["evaluations"] == service.model.attributor.passes() == 31
    assert answer == ask(service, example(), explain=True)  # deterministic


def test_bad_archive_settings_fail_the_load(tabular_artifacts):
    with pytest.raises(ArchiveError, match="max_recrods"):
        ModelService.from_dir(tabular_artifacts, "tabular", {"max_recrods": 3})


def test_the_models_own_serving_code_stays_small():
    files = [
        *sorted((ROOT / "handlers" / "tabular").glob("*.py")),
        ROOT / "handlers" / "tabular_handler.py",
    ]
    lines = sum(1 for f in files for line in f.read_text().splitlines() if line.strip())
    assert lines <= SERVING_LINES, lines


def test_the_command_lines_view_draws_the_attributions(service, tmp_path):
    from tools.tabular.explain_view import render_png

    path = render_png(ask(service, example(), explain=True), tmp_path / "why.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
