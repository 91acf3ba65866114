"""Are the sentiment explanations faithful? Deletion curves over held-out reviews.

For each review: explain the predicted label, delete its top-k attributed words from the text
and measure how much the label's calibrated probability drops; do the same with k random words
of the text (averaged over draws). A faithful explanation's top words matter more than random
ones: the ratio top/random is the headline figure (docs/explanations.md). k is a count of words
or a share of the review's words ("10%"). Both probabilities, before and after, come from the
predictor's own answer (`predict`), as a client would read them.

    # short reviews (6-60 words), every method
    python -m training.sentiment.faithfulness --artifacts artifacts/sentiment
    # real IMDB lengths: 50 reviews of 150-400 words, k = 3 and 10 %, 3 random draws
    python -m training.sentiment.faithfulness --long --methods hierarchical:log-odds
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from handlers.kits.text.explain import METHODS, SCORES, TextExplainer, word_spans
from training.common.deletion import plot, report, summary

KS: tuple[int | str, ...] = (1, 3, 5)
LONG_KS: tuple[int | str, ...] = (3, "10%")
"""Real reviews: 3 words and a tenth of the review's words."""


def delete_words(text: str, spans: list[tuple[int, int]], which: list[int]) -> str:
    out, last = [], 0
    for i in sorted(which):
        s, e = spans[i]
        out.append(text[last:s])
        last = e
    out.append(text[last:])
    return "".join(out)


def held_out_reviews(
    n: int, max_words: int, seed: int, min_words: int = 6, source: str | None = None
) -> list[str]:
    """n test-split reviews (never trained or calibrated on) of min_words..max_words words, from
    `source` (imdb, rotten_tomatoes) or both."""
    from training.sentiment.data import load_splits

    test = load_splits().test
    rng = np.random.default_rng(seed)
    texts = [
        test.text[i]
        for i in rng.permutation(len(test))
        if source is None or test.source[i] == source
    ]
    return [t for t in texts if min_words <= len(word_spans(t)) <= max_words][:n]


def words_for(k: int | str, n: int) -> int:
    """k words, or a share of n ("10%": at least one), never more than n."""
    if isinstance(k, str):
        return min(n, max(1, round(n * float(k.rstrip("%")) / 100)))
    return min(k, n)


def evaluate(
    explainer: TextExplainer,
    texts: list[str],
    draws: int,
    seed: int,
    first: bool = True,
    ks: Sequence[int | str] = KS,
    progress: bool = True,
) -> dict:
    import captum.attr  # noqa: F401  (loaded before the clock starts: seconds per explanation)

    predictor = explainer.predictor
    labels = list(predictor.settings.export.labels)
    rng = np.random.default_rng(seed)
    top: dict[str, list[float]] = {str(k): [] for k in ks}
    rand: dict[str, list[float]] = {str(k): [] for k in ks}
    seconds, evaluations, over_price = [], [], 0
    for text in tqdm(texts, desc=f"{explainer.method}/{explainer.score}", unit="review",
                     disable=not progress):  # fmt: skip
        t0 = time.perf_counter()
        ex = explainer.explain(text)
        seconds.append(time.perf_counter() - t0)
        evaluations.append(ex.evaluations)
        over_price += ex.evaluations > explainer.cost(text)
        idx = labels.index(ex.target)
        spans = [(w.start, w.end) for w in ex.words]
        order = list(np.argsort([-w.attribution for w in ex.words], kind="stable"))
        edited, owners = [text], [("base", "")]
        for k in ks:
            size = words_for(k, len(spans))
            edited.append(delete_words(text, spans, order[:size]))
            owners.append(("top", str(k)))
            for _ in range(draws):
                pick = rng.choice(len(spans), size=size, replace=False)
                edited.append(delete_words(text, spans, list(pick)))
                owners.append(("random", str(k)))
        probs = [p["probabilities"][labels[idx]] for p in predictor.predict(edited)]
        for (kind, k), p in zip(owners[1:], probs[1:], strict=True):
            (top if kind == "top" else rand)[k].append(probs[0] - p)
    name = f"{explainer.method} ({explainer.score})"
    return {
        "label": name,
        "method": explainer.method,
        "score": explainer.score,
        "random_label": "random words" if first else None,
        "reviews": len(texts),
        "random_draws": draws,
        "deletion": summary([str(k) for k in ks], top, rand),
        "seconds_per_explanation": float(np.mean(seconds)),
        "p50_seconds": float(np.median(seconds)),
        "evaluations_per_explanation": float(np.mean(evaluations)),
        "most_evaluations": int(max(evaluations, default=0)),
        # explanations that ran more forward passes than `cost` priced them at: should be none
        "over_price": over_price,
        "words_per_review": float(np.mean([len(word_spans(t)) for t in texts])),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--artifacts", type=Path, default=Path("artifacts/sentiment"))
    p.add_argument("--out", type=Path, default=Path("reports/explanations"))
    p.add_argument(
        "--long",
        action="store_true",
        help="real IMDB lengths: 150-400-word IMDB reviews, k = 3 and 10%%, 50 reviews, 3 draws",
    )
    p.add_argument("--reviews", type=int)
    p.add_argument("--max-words", type=int)
    p.add_argument("--draws", type=int, help="random deletions per review and k")
    p.add_argument(
        "--methods",
        help="comma-separated method:score[:passes] (passes: hierarchical and kernel-shap)",
    )
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    from handlers.sentiment.predict import SentimentPredictor
    from training.common.machine import cpu_summary, describe_cpu

    if args.long:
        ks, name, min_words, source = LONG_KS, "sentiment_long", 150, "imdb"
        reviews, max_words, draws = 50, 400, 3
        methods = "hierarchical:log-odds,ablation:log-odds,kernel-shap:log-odds"
    else:
        ks, name, min_words, source = KS, "sentiment", 6, None
        reviews, max_words, draws = 200, 60, 5
        methods = "ablation:log-odds,ablation:probability,shapley:log-odds"
    reviews = args.reviews or reviews
    max_words = args.max_words or max_words
    draws = args.draws or draws
    methods = args.methods or methods
    predictor = SentimentPredictor.from_dir(
        args.artifacts, {"threads": args.threads}, name="sentiment"
    )
    texts = held_out_reviews(reviews, max_words, args.seed, min_words, source)
    results = []
    for i, spec in enumerate(methods.split(",")):
        method, score, *passes = spec.split(":")
        if method not in METHODS or score not in SCORES or not all(x.isdigit() for x in passes):
            p.error(f"--methods: {spec!r} is not method:score[:passes] of {METHODS} x {SCORES}")
        explainer = TextExplainer(predictor, method, score, passes=int((passes or [48])[0]))
        result = evaluate(explainer, texts, draws, args.seed, first=i == 0, ks=ks)
        if passes:
            result["label"] = f"{method} {passes[0]} passes ({score})"
        results.append(result)
    meta = {"model": dict(predictor.model_info), "cpu": cpu_summary(describe_cpu())}
    report(args.out, name, results, ks, meta)
    plot(results, ks, args.out / f"{name}_deletion.png",
         f"Sentiment deletion curves, {len(texts)} held-out reviews", "words deleted (k)",
         "mean drop of the predicted label's probability")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
