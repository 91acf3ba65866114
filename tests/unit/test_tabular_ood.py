"""The tabular model knows an impossible record: records whose every value lies in the training
ranges but which do not go together are flagged out_of_distribution (or answered unsure), and
held-out records are rarely flagged. Asked as served (ModelService over the ONNX export) of the
default recipe the session trains (seconds), with generators of this file's own that training does
not use: every feature at its training maximum, columns permuted within a record, records built
from columns of random records."""

from __future__ import annotations

import json

import numpy as np
import pytest

from handlers.errors import RequestError
from handlers.service import ModelService, Request

SURE = 0.99
"""An answer at least this sure of its label is a confident one."""
MOST_SURE_UNFLAGGED = 0.05
"""Of impossible records, at most this fraction may be answered confidently and not flagged."""
MOST_FALSE_FLAGS = 0.05
"""Of held-out records, at most this fraction may be flagged."""


@pytest.fixture(scope="module")
def served(tabular_default_artifacts):
    from training.tabular.data import load_splits

    service = ModelService.from_dir(tabular_default_artifacts, "tabular", {})
    return service, load_splits()["test"]


def ask(service: ModelService, records: list[dict]) -> list[dict]:
    answers = []
    for i in range(0, len(records), 200):
        body = json.dumps({"records": records[i : i + 200]}).encode()
        [reply] = service.handle_batch([Request(body, {"Content-Type": "application/json"})])
        assert not isinstance(reply, RequestError), reply
        answers += json.loads(reply.body)
    return answers


def impossible(test, schema, seed: int = 2027) -> dict[str, list[dict]]:
    """This file's generators (seeded, over the held-out test records)."""
    rng = np.random.default_rng(seed)
    names, records = list(schema.names), test.records
    top = {f.name: f.high for f in schema.features}
    permuted = []
    for r in records:
        values = rng.permutation([r[n] for n in names])
        permuted.append(dict(zip(names, map(float, values), strict=True)))
    mixed = [{n: records[int(rng.integers(len(records)))][n] for n in names} for _ in records]
    return {"every feature at its maximum": [top], "permuted columns": permuted,
            "columns of random records": mixed}  # fmt: skip


def confident_unflagged(answers: list[dict]) -> float:
    """Fraction answered at p >= SURE without the flag (an answer without the flag: unflagged)."""
    return float(
        np.mean(
            [
                max(a["probabilities"].values()) >= SURE and not a.get("out_of_distribution")
                for a in answers
            ]
        )
    )


def test_impossible_records_are_flagged_or_unsure(served):
    service, test = served
    for name, records in impossible(test, service.model.schema).items():
        answers = ask(service, records)
        rate = confident_unflagged(answers)
        assert rate <= MOST_SURE_UNFLAGGED, f"{name}: {rate:.3f} answered at p >= {SURE} unflagged"
        assert all("distance" in a for a in answers), name


def test_held_out_records_are_rarely_flagged(served):
    service, test = served
    answers = ask(service, test.records)
    flagged = np.array([a["out_of_distribution"] for a in answers])
    assert flagged.mean() <= MOST_FALSE_FLAGS, f"{flagged.sum()} of {len(flagged)} flagged"
    assert min(a["distance"] for a in answers) > 0
    threshold = service.model.export.ood_threshold
    assert all(a["out_of_distribution"] == (a["distance"] > threshold) for a in answers[:5])


def test_the_distance_is_what_the_manifest_and_metrics_say(tabular_default_artifacts, served):
    """Exported with the model: distance.npz listed and hashed in the manifest, its threshold in the
    handler block, parity against an independent solve, the test split's false-flag rate in
    metrics.json as the served answers give it."""
    service, test = served
    manifest = json.loads((tabular_default_artifacts / "manifest.json").read_text())
    assert "distance.npz" in manifest["files"]
    assert manifest["handler"]["ood_threshold"] == service.model.export.ood_threshold
    parity = json.loads((tabular_default_artifacts / "parity.json").read_text())
    assert parity["distance"]["max_abs_diff"] < 1e-6
    metrics = json.loads((tabular_default_artifacts / "metrics.json").read_text())
    stated = metrics["out_of_distribution"]["false_flags_test"]
    answers = ask(service, test.records)
    assert stated["flagged"] == sum(a["out_of_distribution"] for a in answers)
    low, high = stated["interval_95"]
    assert low <= stated["rate"] <= high and stated["records"] == len(test.records)
