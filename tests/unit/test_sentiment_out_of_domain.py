"""Sentiment outside its movie-review domain: product and service reviews and short social posts
(tests/fixtures/data/sentiment_out_of_domain.tsv, 36 texts written for this test, half positive),
read by the full-size model through the in-process predictor.

What is watched is not only how many it gets right but how sure it is when wrong: a change that
makes the model confidently wrong off its domain fails here even if its movie-review figures hold.

Measured with the full-size (default) model on AMD EPYC, AVX-512 BF16, 2 CPUs: fp32 ONNX 34 of 36
(0.944), its two errors at probability 0.51 and 0.82; the gated int8 export 33 of 36 (0.917),
errors at 0.56, 0.57 and 0.79. Every error is a service review or a social post whose facts are
good or bad news without a sentiment word ("explained the problem", "missed my sister's ...").

The full-size artifacts are `artifacts/sentiment` (make train / make serve write them; CI's
`make serve` does before `make test`). Missing, this test fails under CI=true and skips otherwise:
the tiny test model says nothing about the real one's behaviour.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from handlers.sentiment.predict import SentimentPredictor
from tests.support.full_size import require_full_size
from training.sentiment.quantize import INT8_FILE

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "sentiment"
TEXTS = ROOT / "tests" / "fixtures" / "data" / "sentiment_out_of_domain.tsv"

ACCURACY_FLOOR = 0.85
"""Five errors of 36 allowed (two to three measured): retraining moves a borderline text or two,
and 0.85 is what an independent 20-text set of product and service reviews measured (17 of 20)."""
ERROR_CEILING = 0.95
"""No error surer than this (0.82 measured): room for a retrain's drift, while an answer wrong at
0.95 or more on a plain review is the confidently wrong behaviour this test is here to catch."""


def int8_missing(artifacts: Path, flags: set[str] | None = None) -> str | None:
    """Why a missing int8 export fails the int8 leg; None: it skips, which it may only where this
    CPU class builds none (no int8 dot products: `runtime: auto` serves fp32 there, so no int8
    answer exists to judge) and training recorded so. On a CPU that builds one (its gate refused
    it, or it was lost), and under CI (CI=true) without training's record of why none was built,
    the leg fails with the reason. `flags`: the CPU's (default: this machine's)."""
    import json
    import os

    from training.sentiment.config import DEFAULT
    from training.sentiment.quantize import int8_skipped_because

    int8 = json.loads((artifacts / "manifest.json").read_text()).get("metrics", {}).get("int8", {})
    refused = "; ".join(int8.get("refused_because") or []) or "no reason recorded"
    if int8_skipped_because(DEFAULT.int8, flags) is None:
        return f"this CPU builds an int8 export but {artifacts} has no {INT8_FILE}: {refused}"
    if os.environ.get("CI", "").lower() == "true" and not int8.get("skipped_because"):
        return f"CI=true but no {INT8_FILE} in {artifacts}, and training did not record why"
    return None


def out_of_domain_set() -> list[tuple[str, str, str]]:
    """(label, domain, text) rows of the fixture."""
    rows = []
    for line in TEXTS.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            label, domain, text = line.split("\t")
            rows.append((label, domain, text))
    return rows


@pytest.fixture(scope="module", params=["onnx", "onnx-int8"])
def full_size_predictor(request) -> SentimentPredictor:
    """The full-size model in fp32 ONNX and in the gated int8 export (`runtime: auto` serves it
    on CPUs with int8 dot products)."""
    require_full_size(ARTIFACTS)
    if request.param == "onnx-int8" and not (ARTIFACTS / INT8_FILE).is_file():
        why = int8_missing(ARTIFACTS)
        if why is not None:
            pytest.fail(why)
        pytest.skip("no int8 export: this CPU class builds none (no int8 dot products)")
    return SentimentPredictor.from_dir(ARTIFACTS, {"runtime": request.param, "threads": 1})


AVX2 = {"avx2", "fma"}
VNNI = AVX2 | {"avx512_vnni"}


def test_a_missing_int8_export_fails_where_one_should_exist(tmp_path, monkeypatch):
    import json

    def manifest(int8: dict) -> Path:
        (tmp_path / "manifest.json").write_text(json.dumps({"metrics": {"int8": int8}}))
        return tmp_path

    refused = {
        "written": False,
        "refused_because": ["IMDB test accuracy 0.8800 is 1.20 points below"],
    }
    not_built = {"written": False, "skipped_because": "not built on this CPU: no int8 dot products"}
    monkeypatch.delenv("CI", raising=False)
    assert "1.20 points below" in int8_missing(manifest(refused), VNNI)
    assert int8_missing(manifest({}), VNNI) is not None  # lost: fails
    assert int8_missing(manifest(not_built), AVX2) is None  # nothing to judge: skips
    assert int8_missing(manifest({}), AVX2) is None
    monkeypatch.setenv("CI", "true")
    assert "did not record why" in int8_missing(manifest({}), AVX2)
    assert int8_missing(manifest(not_built), AVX2) is None
    assert int8_missing(manifest(refused), VNNI) is not None


def test_fixture_is_balanced_over_labels_and_domains():
    rows = out_of_domain_set()
    assert len(rows) == 36
    assert {label for label, _, _ in rows} == {"positive", "negative"}
    for domain in ("product", "service", "social"):
        labels = [label for label, d, _ in rows if d == domain]
        assert labels.count("positive") == labels.count("negative") == 6, domain


def test_out_of_domain_accuracy_and_error_confidence(full_size_predictor, record_property):
    rows = out_of_domain_set()
    answers = full_size_predictor.predict([text for _, _, text in rows])
    correct = np.array(
        [a["label"] == label for a, (label, _, _) in zip(answers, rows, strict=True)]
    )
    confidence = np.array([max(a["probabilities"].values()) for a in answers])
    errors = [
        f"{domain}: {a['label']} at {max(a['probabilities'].values()):.2f}: {text[:50]}"
        for a, (label, domain, text) in zip(answers, rows, strict=True)
        if a["label"] != label
    ]
    accuracy = float(correct.mean())
    worst = float(confidence[~correct].max()) if errors else 0.0
    record_property("out_of_domain_accuracy", round(accuracy, 4))
    record_property("out_of_domain_max_error_confidence", round(worst, 4))
    report = f"accuracy {accuracy:.3f} ({correct.sum()}/{len(rows)}); errors: {errors}"
    print(report)
    assert accuracy >= ACCURACY_FLOOR, report
    assert worst <= ERROR_CEILING, report
