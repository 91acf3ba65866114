"""Are the sentiment explanations faithful? Deletion curves over held-out reviews.

For each review: explain the predicted label, delete its top-k attributed words from the text
(k = 1, 3, 5), and measure how much the label's calibrated probability drops; do the same with k
random words (averaged over draws). A faithful explanation's top words matter more than random ones:
the ratio top/random at k = 3 is the headline figure (docs/explanations.md).

    python -m training.sentiment.faithfulness --artifacts artifacts/sentiment --out reports/explanations
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from handlers.sentiment.explain import METHODS, SCORES, SentimentExplainer, word_spans
from training.common.deletion import plot, report, summary

KS = (1, 3, 5)


def delete_words(text: str, spans: list[tuple[int, int]], which: list[int]) -> str:
    out, last = [], 0
    for i in sorted(which):
        s, e = spans[i]
        out.append(text[last:s])
        last = e
    out.append(text[last:])
    return "".join(out)


def held_out_reviews(n: int, max_words: int, seed: int) -> list[str]:
    """n test-split reviews (never trained or calibrated on) of 6..max_words words."""
    from training.sentiment.data import load_splits

    test = load_splits().test
    rng = np.random.default_rng(seed)
    texts = [test.text[i] for i in rng.permutation(len(test))]
    return [t for t in texts if 6 <= len(word_spans(t)) <= max_words][:n]


def evaluate(
    explainer: SentimentExplainer, texts: list[str], draws: int, seed: int, first: bool = True
) -> dict:
    predictor = explainer.predictor
    labels = list(predictor.settings.labels)
    rng = np.random.default_rng(seed)
    top: dict[int, list[float]] = {k: [] for k in KS}
    rand: dict[int, list[float]] = {k: [] for k in KS}
    seconds, evaluations = [], []
    for text in tqdm(texts, desc=f"{explainer.method}/{explainer.score}", unit="review"):
        t0 = time.perf_counter()
        ex = explainer.explain(text)
        seconds.append(time.perf_counter() - t0)
        evaluations.append(ex.evaluations)
        idx = labels.index(ex.target)
        spans = [(w.start, w.end) for w in ex.words]
        order = list(np.argsort([-w.attribution for w in ex.words], kind="stable"))
        edited, owners = [], []
        for k in KS:
            edited.append(delete_words(text, spans, order[:k]))
            owners.append(("top", k))
            for _ in range(draws):
                pick = rng.choice(len(spans), size=min(k, len(spans)), replace=False)
                edited.append(delete_words(text, spans, list(pick)))
                owners.append(("random", k))
        probs = [p["probabilities"][labels[idx]] for p in predictor.predict(edited)]
        for (kind, k), p in zip(owners, probs, strict=True):
            drop = ex.probability - p
            (top if kind == "top" else rand)[k].append(drop)
    name = f"{explainer.method} ({explainer.score})"
    return {
        "label": name,
        "method": explainer.method,
        "score": explainer.score,
        "random_label": "random words" if first else None,
        "reviews": len(texts),
        "random_draws": draws,
        "deletion": summary(KS, top, rand),
        "seconds_per_explanation": float(np.mean(seconds)),
        "evaluations_per_explanation": float(np.mean(evaluations)),
        "words_per_review": float(np.mean([len(word_spans(t)) for t in texts])),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--artifacts", type=Path, default=Path("artifacts/sentiment"))
    p.add_argument("--out", type=Path, default=Path("reports/explanations"))
    p.add_argument("--reviews", type=int, default=200)
    p.add_argument("--max-words", type=int, default=60)
    p.add_argument("--draws", type=int, default=5, help="random deletions per review and k")
    p.add_argument("--methods", default="ablation:log-odds,ablation:probability,shapley:log-odds")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from handlers.sentiment.predict import SentimentPredictor
    from training.common.machine import cpu_summary, describe_cpu

    predictor = SentimentPredictor.from_dir(
        args.artifacts, {"threads": args.threads}, name="sentiment"
    )
    texts = held_out_reviews(args.reviews, args.max_words, args.seed)
    results = []
    for i, spec in enumerate(args.methods.split(",")):
        method, score = spec.split(":")
        if method not in METHODS or score not in SCORES:
            p.error(f"--methods: {spec!r} is not method:score of {METHODS} x {SCORES}")
        explainer = SentimentExplainer(predictor, method, score)
        results.append(evaluate(explainer, texts, args.draws, args.seed, first=i == 0))
    meta = {"model": dict(predictor.model_info), "cpu": cpu_summary(describe_cpu())}
    report(args.out, "sentiment", results, KS, meta)
    plot(results, KS, args.out / "sentiment_deletion.png",
         f"Sentiment deletion curves, {len(texts)} held-out reviews", "words deleted (k)",
         "mean drop of the predicted label's probability")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
