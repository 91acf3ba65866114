"""The held-out questions `make check-served` asks the served frequency model
(training/common/heldout.py): the held-out served-family signals the training report's floors
were measured on, as one-shot requests, and the documented example against its truth.

Streams are not asked here: a stream's answer carries a state token signed with the server's key,
which the MLflow PyFunc (signing with its own) cannot answer alike; the stream mode's floors are
held in training, through the same engine code (handlers/frequency/lockin.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from training.common.heldout import HeldOut, Outcome

SLACK = 0.01
"""A served figure may be this much worse than the report's (the same signals through the export,
which answers as the eager model within its parity tolerance)."""
FIGURE_ATOL = 1e-3
"""A served signal's figure (a component's correlation with its truth, an absent one's RMS
ratio) may differ from training's per-item figure by this (the exports answer as the eager model
within their parity tolerance); the figures pooled over the served answers, from the report's."""
EXAMPLE_MIN_R = 0.95
"""Each component of the documented example (`python -m clients predict frequency --synthetic
2000`: tools/frequency/samples.synthetic_signal) must correlate with its truth at least this."""
EXAMPLE_SAMPLES = 2000


def served_check(manifest: dict, artifacts: Path) -> HeldOut:
    """Each held-out signal as a one-shot request, then the example (judged when the model was
    trained under the floors)."""
    from tools.frequency.samples import synthetic_example
    from training.frequency.config import CONFIGS, TrainConfig
    from training.frequency.quality import MODES, per_signal, scores

    path = artifacts / "metrics.json"
    config = json.loads(path.read_text()).get("config", {}) if path.is_file() else {}
    default: TrainConfig = CONFIGS["default"]
    cfg_seed = config.get("test_seed", default.test_seed)
    count = config.get("eval_signals", default.eval_signals)
    samples = config.get("eval_samples", default.eval_samples)
    frequencies = list(manifest["handler"]["frequencies"])
    rate = manifest["handler"]["sample_rate"]
    drawn = _held_out(cfg_seed, count, samples)
    bodies: list[dict] = [
        {"signal": x.tolist(), "sample_rate": rate, "frequencies": frequencies} for x in drawn.mixed
    ]
    example, truth = synthetic_example(EXAMPLE_SAMPLES)
    bodies.append({"signal": example.tolist(), "sample_rate": rate, "frequencies": frequencies})
    reported = manifest["metrics"]["heldout_family"]
    floors = {
        "median_r": config.get("floors_median_r"),
        "p10_r": config.get("floors_p10_r"),
        "absent_ratio": config.get("floors_absent"),
    }

    def judge(answers: list[Any], out: Outcome) -> None:
        for k, mode in enumerate(MODES[:1]):  # "windows": the one-shot answer
            part = answers[k * count : (k + 1) * count]
            served = np.stack([[c["signal"] for c in a["components"]] for a in part]).astype(
                np.float64
            )
            got = scores(served, drawn.components)
            for name, higher in (("median_r", True), ("p10_r", True), ("absent_ratio", False)):
                value, report = got[name], reported[f"{mode}_{name}"]
                ok = value >= report - SLACK if higher else value <= report + SLACK
                floor = floors[name]
                if floor is not None:
                    ok = ok and (value >= floor if higher else value <= floor)
                out.check(ok, f"{mode} {name} {value:.4f} on {count} held-out family signals "
                          f"(report {report:.4f}, floor {floor})")  # fmt: skip
        if floors["median_r"] is None:
            return  # a model trained without the floors (the tiny config) is not held to it
        for i, component in enumerate(answers[-1]["components"]):
            r = float(np.corrcoef(np.asarray(component["signal"], np.float64), truth[i])[0, 1])
            out.check(r >= EXAMPLE_MIN_R, f"the documented example, {component['frequency']:g} "
                      f"Hz: correlation {r:.4f} with its truth (at least {EXAMPLE_MIN_R})")  # fmt: skip

    def per_item(answers: list[Any], predicted: dict, out: Outcome, where: str) -> None:
        items = predicted["items"]
        part = answers[:count]
        if len(items) != len(part):
            out.check(False, f"{where}: {len(part)} answers for {len(items)} predicted signals")
            return
        served = np.stack([[c["signal"] for c in a["components"]] for a in part]).astype(np.float64)
        got = per_signal(served, drawn.components)
        worst, differ = 0.0, []
        for s, t in zip(got, items, strict=True):
            for key in ("r", "absent_ratio"):
                for a, b in zip(s[key], t[key], strict=True):
                    gap = abs(a - b) if a is not None and b is not None else float(a is not b)
                    worst = max(worst, gap)
                    if gap > FIGURE_ATOL and t["id"] not in differ:
                        differ.append(t["id"])
        out.check(not differ, f"{where}: each signal's component figures within {FIGURE_ATOL} of "
                  f"training's on {len(items) - len(differ)}/{len(items)} signals (largest "
                  f"difference {worst:.2e})" + (f"; differing {differ[:10]}" if differ else ""))  # fmt: skip
        pooled = scores(served, drawn.components)
        gaps = {
            k: abs(pooled[k] - reported[f"windows_{k}"])
            for k in ("median_r", "p10_r", "absent_ratio")
        }
        out.check(max(gaps.values()) <= FIGURE_ATOL, f"{where}: figures from the served answers = "
                  "the report's (" + ", ".join(f"{k} {pooled[k]:.4f} vs {reported['windows_' + k]:.4f}"
                  for k in gaps) + f", within {FIGURE_ATOL})")  # fmt: skip

    return HeldOut(bodies, judge, per_item)


def _held_out(seed: int, count: int, samples: int):
    from handlers.frequency.family import SERVED
    from training.frequency.data import draw_many

    return draw_many(SERVED, np.random.default_rng(seed), count, samples)
