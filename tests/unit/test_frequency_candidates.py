"""Frequency training keeps the best of several seeds, judged on the validation signal by its worst
component, and refuses a model below the quality floor (training/frequency/candidates.py)."""

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
)
from training.frequency.config import CONFIGS

TINY = CONFIGS["tiny"]


def _candidate(seed: int, mse: dict[str, float]) -> Candidate:
    rows = {f: {"mse_window": m, "mse_stitched": m, "mse_stateful": m / 2} for f, m in mse.items()}
    return Candidate(seed, 100, 1.0, rows, Path("/nonexistent"))


def test_the_worst_component_decides_not_the_mean():
    # Seed 0 learnt three components well and missed one (the failure seen at 5 Hz): a lower mean
    # than seed 1's even errors, and the model to refuse.
    one_missed = _candidate(0, {"1Hz": 0.001, "3Hz": 0.001, "5Hz": 0.088, "7Hz": 0.001})
    even = _candidate(1, {"1Hz": 0.03, "3Hz": 0.03, "5Hz": 0.03, "7Hz": 0.03})
    cfg = dataclasses.replace(TINY, max_validation_mse=0.04)
    assert select([one_missed, even], cfg) is even
    assert select([even, one_missed], cfg) is even
    assert one_missed.score == 0.088


def test_no_candidate_under_the_floor_is_a_quality_error_naming_each_seed():
    cfg = dataclasses.replace(TINY, max_validation_mse=0.02)
    a = _candidate(3, {"1Hz": 0.03, "5Hz": 0.01})
    b = _candidate(4, {"1Hz": 0.05, "5Hz": 0.01})
    with pytest.raises(QualityError, match=r"seed 3: 0\.0300, seed 4: 0\.0500"):
        select([a, b], cfg)
    assert select([a, b], dataclasses.replace(cfg, max_validation_mse=None)) is a


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
    scores = {k: v["validation_worst_mse"] for k, v in metrics["candidates"].items()}
    assert set(scores) == {"seed-0", "seed-1"} and scores["seed-0"] != scores["seed-1"]
    kept = min(scores, key=scores.__getitem__)
    assert f"seed-{metrics['seed']}" == kept == f"seed-{manifest['metrics']['seed']}"
    assert manifest["metrics"]["validation_worst_mse"] == scores
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
    assert saved["validation_worst_mse"] == here.score
