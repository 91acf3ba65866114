"""The faithfulness gate every model's explanations are held to (training/common/deletion.py):
the mean top-k less random-k deletion drop, paired per item, with a bootstrap 95 % interval that
must lie above zero. A random-attribution explainer fails it on a real model; the ratio it
replaces was infinite (so passed) whenever the random drop was at or below zero."""

from __future__ import annotations

import numpy as np
import pytest

from training.common.deletion import paired_interval, summary, unfaithful


def test_a_random_drop_at_or_below_zero_no_longer_passes_any_positive_top_drop():
    # The documented k=3 run's shape (50 reviews, 3 draws): random deletions raised the score a
    # little on average, and the top-k drop is within chance of it.
    rng = np.random.default_rng(0)
    top = rng.normal(0.002, 0.05, 50)
    rand = rng.normal(-0.005, 0.05, 150)
    assert top.mean() > 0 > rand.mean()  # the old gate: top > 0, and ratio inf >= 2: passed
    row = summary(["3"], {"3": list(top)}, {"3": list(rand)})["3"]
    assert row["ratio"] is None
    assert row["draws"] == 3 and row["items"] == 50
    lo, hi = row["ci95"]
    assert lo < row["difference"] < hi
    assert not row["faithful"] and lo <= 0
    [why] = unfaithful({"3": row})
    assert why.startswith("k=3: top-k less random-k drop") and "does not exclude 0" in why


def test_a_clear_difference_passes_and_the_interval_narrows_with_items():
    rng = np.random.default_rng(1)
    d = rng.normal(0.05, 0.1, 400)
    wide = paired_interval(d[:40])
    narrow = paired_interval(d)
    assert narrow[1] - narrow[0] < wide[1] - wide[0]
    row = summary([3], {3: list(0.06 + d)}, {3: list(np.repeat(0.01, 1200))})["3"]
    assert row["faithful"] and row["ci95"][0] > 0 and unfaithful({"3": row}) == []


def test_draws_that_do_not_pair_with_the_items_are_refused():
    with pytest.raises(ValueError, match="draws per item"):
        summary([3], {3: [0.1, 0.2]}, {3: [0.0, 0.0, 0.0]})


@pytest.fixture(scope="module")
def tabular(tabular_default_artifacts):
    from training.tabular.faithfulness import load, test_records

    return load(tabular_default_artifacts), test_records(tabular_default_artifacts)


def test_the_served_tabular_explanations_pass_and_random_attributions_fail(tabular):
    from training.tabular.faithfulness import GATED, evaluate, random_attributions

    model, records = tabular
    served = evaluate(model, records, ks=GATED)
    assert unfaithful(served["deletion"]) == [], served["deletion"]
    shuffled = evaluate(model, records, ks=GATED, attributions=random_attributions(model))
    failed = unfaithful(shuffled["deletion"])
    assert [f.split(":")[0] for f in failed] == ["k=3", "k=10%"], shuffled["deletion"]
