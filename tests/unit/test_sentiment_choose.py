"""The recipe's choices read the selection split only (training/sentiment/choose.py): the rule
keeps the cheapest variant within the tolerance of the most accurate, refuses one further below,
and a run never touches the test split."""

from __future__ import annotations

import json

import numpy as np
import pytest

from training.common.floors import wilson
from training.sentiment import data
from training.sentiment.choose import TOLERANCE, choose, main, paired_interval
from training.sentiment.config import DEFAULT


def scored(correct: list[int]) -> dict:
    k, n = sum(correct), len(correct)
    return {"accuracy_imdb": k / n, "interval_imdb": list(wilson(k, n)), "correct_imdb": correct}


def answers(right: int, n: int = 1000) -> list[int]:
    return [1] * right + [0] * (n - right)


def test_the_cheapest_variant_within_the_tolerance_is_chosen():
    results = {
        "layers-6": scored(answers(900)),
        "layers-5": scored(answers(897)),  # 0.3 points below: within 0.5
        "layers-4": scored(answers(880)),  # 2 points below
    }
    verdict = choose(results, DEFAULT)
    assert verdict["best"] == "layers-6"
    assert verdict["chosen"] == "layers-5"
    assert verdict["standing"]["layers-4"]["within_tolerance"] is False
    lo, hi = verdict["standing"]["layers-4"]["below_best_interval"]
    assert lo <= 0.02 <= hi


def test_a_variant_further_below_than_the_tolerance_is_not_chosen():
    gap = round(TOLERANCE * 1000) + 1  # one review more than the tolerance allows
    results = {"layers-6": scored(answers(900)), "layers-5": scored(answers(900 - gap)),
               "reviews-6000": scored(answers(900 - gap))}  # fmt: skip
    assert choose(results, DEFAULT)["chosen"] == "layers-6"


def test_intervals_cover_the_figure():
    lo, hi = wilson(893, 1000)
    assert lo < 0.893 < hi and hi - lo < 0.04
    a = np.array(answers(900), np.float64)
    b = np.array(answers(880), np.float64)
    lo, hi = paired_interval(a, b)
    assert lo <= 0.02 <= hi and lo > 0  # the same items, 20 more right: a real difference


class Unread:
    """A split whose every use fails the test."""

    def __getattr__(self, name):
        raise AssertionError(f"the test split was read ({name})")

    def __len__(self):
        raise AssertionError("the test split was read (len)")


def test_a_run_scores_the_selection_split_and_never_reads_the_test_split(
    tmp_path, monkeypatch, sentiment_artifacts
):
    real = data.load_splits(0)
    small = data.Splits(train=real.train, validation=real.validation.sample(24, 1), test=Unread())
    monkeypatch.setattr(data, "load_splits", lambda seed=0: small)
    onnx = sentiment_artifacts / "model.onnx"
    args = ["--out", str(tmp_path), "--variant", "layers-6", "--variant", "layers-5",
            "--reuse", f"layers-6={onnx}", "--reuse", f"layers-5={onnx}"]  # fmt: skip
    assert main(args) == 0
    record = json.loads((tmp_path / "selection.json").read_text())
    assert record["split"].startswith("selection (validation), 24 reviews")
    assert set(record["variants"]) == {"layers-6", "layers-5"}
    # The same export twice: equal figures, so the cheaper (shallower) one is chosen.
    assert record["verdict"]["chosen"] == "layers-5"
    assert record["machine"]["cpus"] >= 1


@pytest.mark.parametrize("name", ["layers-3", "reviews-6000"])
def test_variants_change_one_thing(name):
    from training.sentiment.choose import VARIANTS

    cfg = VARIANTS[name].config(DEFAULT)
    changed = {k for k, v in vars(cfg).items() if v != getattr(DEFAULT, k)}
    assert changed <= {"name", "progress", "encoder_layers", "frozen_layers", "train_size"}
    assert cfg.seed == DEFAULT.seed and cfg.max_length == DEFAULT.max_length
