"""Frequency training keeps the best of several seeds, judged on held-out served-family signals by
the worst figure of either mode, and refuses a model below the quality floors
(training/frequency/candidates.py, training/frequency/quality.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from training.common.entry import QualityError
from training.common.trainer import TrainerOptions
from training.frequency.candidates import (
    WEIGHTS,
    Candidate,
    candidate_dir,
    select,
    train_candidate,
    train_candidates,
    untrained,
)
from training.frequency.config import CONFIGS

TINY = CONFIGS["tiny"]


def _report(p10: float, absent: float, stream_p10: float | None = None) -> dict:
    def mode(p):
        return {"median_r": 0.99, "p10_r": p, "absent_ratio": absent}

    return {"windows": mode(p10), "stream": mode(p10 if stream_p10 is None else stream_p10)}


def _candidate(seed: int, report: dict) -> Candidate:
    return Candidate(seed, 100, 1.0, report, Path("/nonexistent"))


def test_the_worst_figure_of_either_mode_decides():
    # Seed 0 is excellent in windows and poor in streams: its stream p10 decides its score.
    one_mode = _candidate(0, _report(0.99, 0.01, stream_p10=0.70))
    even = _candidate(1, _report(0.90, 0.08))
    assert select([one_mode, even], TINY) is even
    assert select([even, one_mode], TINY) is even
    assert one_mode.score == pytest.approx(0.30)


FLOORS = {"floors_median_r": 0.95, "floors_p10_r": 0.85, "floors_absent": 0.15}


def test_a_candidate_meets_the_floors_only_in_both_modes():
    cfg = dataclasses.replace(TINY, **FLOORS)
    assert _candidate(0, _report(0.9, 0.1)).meets(cfg)
    assert not _candidate(0, _report(0.9, 0.1, stream_p10=0.8)).meets(cfg)
    assert not _candidate(0, _report(0.9, 0.2)).meets(cfg)
    assert _candidate(0, _report(0.0, 1.0)).meets(TINY)  # the tiny config's floors are off


def test_candidates_train_one_after_another_until_one_meets_the_floors(monkeypatch, tmp_path):
    # On two cores at two threads a wave is one candidate: seed 5 misses the floors, seed 6 meets
    # them, seed 7 is never trained. Each trains in this process at the config's threads.
    import training.frequency.candidates as candidates

    p10s, calls = {5: 0.7, 6: 0.9, 7: 0.95}, []

    def fake(cfg, seed, opts, root, progress=False):
        calls.append((seed, torch.get_num_threads()))
        return _candidate(seed, _report(p10s[seed], 0.05))

    monkeypatch.setattr(candidates, "train_candidate", fake)
    monkeypatch.setattr(candidates, "_cores", lambda: 2)
    cfg = dataclasses.replace(TINY, candidates=(5, 6, 7), threads=2, **FLOORS)
    threads = torch.get_num_threads()
    got = train_candidates(cfg, TrainerOptions(), tmp_path, progress=False)
    assert calls == [(5, 2), (6, 2)] and torch.get_num_threads() == threads
    assert select(got, cfg).seed == 6 and untrained(got, cfg) == [7]
    # No candidate meets impossible floors: every seed trains, the best is kept; --threads 1
    # reaches each run.
    calls.clear()
    strict = dataclasses.replace(cfg, floors_p10_r=1.01)
    got = train_candidates(strict, TrainerOptions(), tmp_path, False, jobs=1, threads=1)
    assert calls == [(5, 1), (6, 1), (7, 1)] and select(got, strict).seed == 7


def test_the_first_candidate_meeting_the_floors_is_the_pipelines_model(tmp_path):
    # The real tiny pipeline, one candidate at a time: floors every run meets keep seed 0 and
    # never train seed 1 (no directory, named in metrics.json as not trained).
    from training.frequency.__main__ import run

    easy = {"floors_median_r": -1.0, "floors_p10_r": -1.0, "floors_absent": 1e9,
            "floors_coverage": -1.0, "floors_outside": -1.0}  # fmt: skip
    cfg = dataclasses.replace(TINY, steps=20, candidates=(0, 1), **easy)
    manifest = run(tmp_path, cfg, plots=False, progress=False, jobs=1)
    metrics = json.loads((tmp_path / "metrics.json").read_text())
    assert metrics["seed"] == 0 and set(metrics["candidates"]) == {"seed-0"}
    assert metrics["candidates_not_trained"] == [1] == manifest["metrics"]["candidates_not_trained"]
    assert not candidate_dir(tmp_path, 1).exists()
    assert set(metrics["floors"]) == {f.figure for f in cfg.floors}


def test_a_model_under_the_floors_on_held_out_signals_is_neither_exported_nor_registered(tmp_path):
    # 20 tiny steps are far from a correlation of 0.99: training stops before the export.
    from training.frequency.__main__ import run

    cfg = dataclasses.replace(TINY, steps=20, floors_median_r=0.99)
    with pytest.raises(QualityError, match=r"median correlation .*MISSED") as err:
        run(tmp_path, cfg, plots=False, progress=False, jobs=1)
    assert set(err.value.figures) == {"windows_median_r", "stream_median_r"}
    assert not (tmp_path / "manifest.json").exists() and not (tmp_path / "model.onnx").exists()


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    """The tiny pipeline with two seeds trained in two processes."""
    from training.frequency.__main__ import run

    out = tmp_path_factory.mktemp("candidates")
    cfg = dataclasses.replace(TINY, steps=20, candidates=(0, 1))
    manifest = run(out, cfg, plots=False, progress=False, jobs=2)
    return out, cfg, manifest


def test_the_export_is_the_kept_candidate_and_metrics_say_why(two_seeds):
    out, cfg, manifest = two_seeds
    metrics = json.loads((out / "metrics.json").read_text())
    scores = {k: v["validation_score"] for k, v in metrics["candidates"].items()}
    assert set(scores) == {"seed-0", "seed-1"} and scores["seed-0"] != scores["seed-1"]
    kept = min(scores, key=scores.__getitem__)
    assert f"seed-{metrics['seed']}" == kept == f"seed-{manifest['metrics']['seed']}"
    assert manifest["metrics"]["validation_score"] == scores
    weights = torch.load(candidate_dir(out, metrics["seed"]) / WEIGHTS, weights_only=True)
    exported = torch.jit.load(str(out / "model.pt")).state_dict()
    for name, value in weights.items():
        assert torch.equal(exported[f"model.{name}"], value), name


def test_a_candidate_trained_in_a_worker_process_equals_one_trained_here(two_seeds, tmp_path):
    # Side by side must not change what a seed learns: same bits as this process, one thread.
    out, cfg, _ = two_seeds
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each worker process runs
    try:
        here = train_candidate(cfg, 1, TrainerOptions(), tmp_path / "here")
    finally:
        torch.set_num_threads(threads)
    there = torch.load(candidate_dir(out, 1) / WEIGHTS, weights_only=True)
    mine = torch.load(tmp_path / "here" / WEIGHTS, weights_only=True)
    for name, value in mine.items():
        assert torch.equal(there[name], value), name
    saved = json.loads((out / "metrics.json").read_text())["candidates"]["seed-1"]
    assert saved["validation_score"] == here.score
