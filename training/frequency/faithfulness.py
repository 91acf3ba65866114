"""Are the frequency explanations faithful? Sample-perturbation curves over synthetic test signals.

For each signal and requested frequency: explain the component's energy, set the top k% most
attributed input samples to 0 (k = 5, 10, 20) and measure how much the component's energy drops;
the same with k% random samples. Signals are new draws of the training distribution
(training/frequency/data.make_signal with the default config's spec, noise seeds from 10,000: the
training, validation and test signals use seeds 1 to 3).

    python -m training.frequency.faithfulness --artifacts artifacts/frequency --out reports/explanations
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from handlers.kits.signal.codec import SignalRequest
from handlers.kits.signal.explain import BlockExplainer
from training.common.deletion import plot, report, summary

KS: tuple[int | str, ...] = ("3 blocks", 5, 10, 20)
"""Samples perturbed: a percent of the signal's, or that many of the explainer's blocks."""
GATED: tuple[int | str, ...] = ("3 blocks", 10)
"""The k the faithfulness gate holds (training/common/deletion.unfaithful): 3 blocks, 10 %."""


def samples_for(k: int | str, samples: int, block: int) -> int:
    if isinstance(k, str):
        return int(k.split()[0]) * block
    return samples * k // 100


SEED_OFFSET = 10_000
"""Signal seeds start here: training and its evaluation draw theirs well below."""


def energy(engine, requests: list[SignalRequest]) -> np.ndarray:
    return np.array([float(np.mean(c.signal[0] ** 2)) for c in engine.windows(requests)])


def evaluate(explainer: BlockExplainer, signals: int, samples: int, draws: int, seed: int) -> dict:
    from training.frequency.config import CONFIGS
    from training.frequency.data import make_signal

    spec = CONFIGS["default"].signal
    p = explainer.predictor
    s = p.settings
    rng = np.random.default_rng(seed)
    top: dict[str, list[float]] = {str(k): [] for k in KS}
    rand: dict[str, list[float]] = {str(k): [] for k in KS}
    seconds, passes = [], []
    for i in tqdm(range(signals), desc="occlusion", unit="signal"):
        x = make_signal(spec, SEED_OFFSET + seed + i).mixed[:samples].copy()
        samples = x.shape[0]
        req = SignalRequest(
            x, s.sample_rate, tuple(s.frequencies), tuple(range(len(s.frequencies)))
        )
        t0 = time.perf_counter()
        ex = explainer.explain(req)
        seconds.append(time.perf_counter() - t0)
        passes.append(ex.evaluations)
        for j, f in enumerate(s.frequencies):
            one = replace(req, frequencies=(f,), selectors=(j,))
            order = np.argsort(-ex.attributions[j], kind="stable")
            edited, owners = [], []
            for key in KS:
                n, k = samples_for(key, samples, explainer.block), str(key)
                picks = [("top", order[:n])] + [
                    ("random", rng.choice(samples, n, replace=False)) for _ in range(draws)
                ]
                for kind, pick in picks:
                    y = x.copy()
                    y[pick] = 0.0
                    edited.append(replace(one, signal=y))
                    owners.append((kind, k))
            for (kind, k), e in zip(owners, energy(p.engine, edited), strict=True):
                (top if kind == "top" else rand)[k].append(ex.energy[j] - e)
    return {
        "label": f"occlusion (blocks of {explainer.block})",
        "method": "occlusion",
        "random_label": "random samples",
        "deletion": summary([str(k) for k in KS], top, rand),
        "seconds_per_explanation": float(np.mean(seconds)),
        "evaluations_per_explanation": float(np.mean(passes)),
        "signals": signals,
        "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--artifacts", type=Path, default=Path("artifacts/frequency"))
    ap.add_argument("--out", type=Path, default=Path("reports/explanations"))
    ap.add_argument("--signals", type=int, default=50)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--block", type=int, default=100)
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from handlers.frequency.predict import FrequencyPredictor
    from training.common.machine import cpu_summary, describe_cpu

    p = FrequencyPredictor.from_dir(
        args.artifacts, {"threads": 2}, name="frequency", state_key=b"x" * 32
    )
    results = [
        evaluate(
            BlockExplainer(p, block=args.block),
            args.signals,
            args.samples,
            args.draws,
            args.seed,
        )
    ]
    meta = {"model": dict(p.model_info), "cpu": cpu_summary(describe_cpu())}
    report(args.out, "frequency", results, KS, meta)
    plot(results, KS, args.out / "frequency_deletion.png",
         f"Frequency sample perturbation, {args.signals} signals x {len(p.settings.frequencies)} components",
         "input samples set to 0 (3 blocks, then % of the signal)", "mean drop of the component's energy")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
