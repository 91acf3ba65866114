"""Do explanations slow predictions down? Prediction latency with and without a concurrent
explanation load on one real TorchServe, and what an explanation costs.

    python -m bench.explanations --archive model_store/<model>.mar [--model <model>] \\
        [--predictors 4] [--explainers 2] [--seconds 30] [--out reports/explanations] \\
        [--review-words 230 --reviews 10]

Phase 0 (sentiment, `--review-words`): one client explains held-out IMDB reviews of that many
words (+-5; the test split, never trained on) back to back (`--pace` seconds apart, default 0),
each followed by the same review's prediction; reported: their p50/max latency through the
server, how many were refused (none: with no prediction load the explanation share does not bind),
with the CPU class (`make bench-explain`: 230 words, the median IMDB review).
Phase 1: `--predictors` closed-loop clients send the model's load payloads (its samples.py) to
/predictions for `--seconds`. Phase 2: the same, while `--explainers` clients send the same kind of
bodies to /explanations. Reported per phase: prediction p50/p99 and throughput; for explanations,
their latency, how many were answered and how many were refused fast (503 past the batch's
explanation budget, 400 over the per-request limit) and how fast the refusals came back.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import requests

from tests.support.torchserve import start_torchserve
from tools.registry import get


class _Done(Exception):
    """--only-reviews: the load phases are skipped."""


def percentile(values: list[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def clients(
    server, model: str, route: str, n: int, seconds: float, seed: int, max_bytes: int | None = None
) -> list[dict]:
    def drawer(i: int):
        draw = get(model).samples().payloads(seed=seed + i)
        if max_bytes is None:
            return draw
        return lambda: next(b for b in iter(draw, None) if len(json.dumps(b)) <= max_bytes)

    draw_for = [drawer(i) for i in range(n)]
    out: list[dict] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        session = requests.Session()
        while time.monotonic() < stop:
            body = draw_for[i]()
            t0 = time.perf_counter()
            r = session.post(
                f"{server.inference_url}/{route}/{model}",
                json=body,
                headers=server.auth(),
                timeout=120,
            )
            ms = (time.perf_counter() - t0) * 1000
            kind = r.json().get("kind") if r.status_code != 200 else None
            with lock:
                out.append({"status": r.status_code, "ms": ms, "kind": kind})

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def review_latency(server, words: int, count: int, pace: float) -> dict:
    """A lone client's explanations of `count` held-out IMDB reviews of `words` (+-5) words."""
    from training.sentiment.faithfulness import held_out_reviews

    texts = held_out_reviews(count + 1, words + 5, seed=0, min_words=words - 5, source="imdb")
    session = requests.Session()
    out: list[dict] = []

    def timed(route: str, text: str) -> tuple[requests.Response, float]:
        t0 = time.perf_counter()
        r = session.post(
            f"{server.inference_url}/{route}/sentiment",
            json={"text": text},
            headers=server.auth(),
            timeout=120,
        )
        return r, (time.perf_counter() - t0) * 1000

    for i, text in enumerate(texts):
        r, ms = timed("explanations", text)
        body = r.json()
        # The same review's prediction, right after: the explanation's cost in predictions
        # (a ratio that holds where other jobs slow both down alike).
        predicted, predict_ms = timed("predictions", text)
        if i:  # the first one loads Captum in the worker
            out.append({"status": r.status_code, "ms": ms, "passes": body.get("evaluations"),
                        "error": body.get("error"), "predict_ms": predict_ms,
                        "predict_status": predicted.status_code})  # fmt: skip
        time.sleep(max(0.0, pace - ms / 1000))
    ok = [c["ms"] for c in out if c["status"] == 200]
    return {
        "words": words,
        "reviews": len(out),
        "answered": len(ok),
        "statuses": sorted({c["status"] for c in out}),
        "errors": sorted({c["error"] for c in out if c["error"]}),
        "p50_ms": percentile(ok, 50),
        "max_ms": max(ok, default=None),
        "prediction_p50_ms": percentile(
            [c["predict_ms"] for c in out if c["predict_status"] == 200], 50
        ),
        "passes": max((c["passes"] or 0 for c in out), default=0),
        "pace_s": pace,
        "refused": sum(c["status"] == 503 for c in out),
    }


def stats(calls: list[dict], seconds: float) -> dict:
    ok = [c["ms"] for c in calls if c["status"] == 200]
    refused = [c for c in calls if c["status"] in (400, 503)]
    return {
        "answered": len(ok),
        "per_s": len(ok) / seconds,
        "p50_ms": percentile(ok, 50),
        "p99_ms": percentile(ok, 99),
        "refused": {str(s): sum(c["status"] == s for c in refused) for s in (400, 503)},
        "refusal_p99_ms": percentile([c["ms"] for c in refused], 99),
        "errors": sum(c["status"] >= 500 and c["status"] != 503 for c in calls),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--archive", type=Path, required=True)
    ap.add_argument("--model", help="registered model (default: from the archive's file name)")
    ap.add_argument("--predictors", type=int, default=4)
    ap.add_argument("--explainers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument(
        "--explain-bytes",
        type=int,
        default=None,
        help="explanation clients send load payloads up to this JSON size (default: all of "
        "them, reviews up to 8 KB and 4-text requests; those over the explanation limit are "
        "refused with 400 and counted)",
    )
    ap.add_argument("--out", type=Path, default=Path("reports/explanations"))
    ap.add_argument(
        "--review-words",
        type=int,
        default=0,
        help="sentiment: first time a lone client's explanations of held-out reviews of this "
        "many words (0: skip)",
    )
    ap.add_argument("--reviews", type=int, default=10, help="with --review-words: how many")
    ap.add_argument(
        "--pace",
        type=float,
        default=0.0,
        help="with --review-words: seconds from one explanation to the next (the explanation "
        "share binds only under a prediction load: a lone client is never refused)",
    )
    ap.add_argument(
        "--only-reviews", action="store_true", help="with --review-words: skip the load phases"
    )
    args = ap.parse_args(argv)
    from training.common.machine import cpu_summary, describe_cpu

    model = args.model or get(args.archive.stem).name
    with tempfile.TemporaryDirectory() as tmp:
        server = start_torchserve(Path(tmp), {model: args.archive})
        try:
            clients(server, model, "predictions", args.predictors, 3, 99)  # warm up
            lone = (
                review_latency(server, args.review_words, args.reviews, args.pace)
                if args.review_words
                else None
            )
            if args.only_reviews:
                raise _Done
            alone = stats(
                clients(server, model, "predictions", args.predictors, args.seconds, 0),
                args.seconds,
            )
            result: dict = {}
            t = threading.Thread(
                target=lambda: result.update(
                    e=clients(
                        server,
                        model,
                        "explanations",
                        args.explainers,
                        args.seconds,
                        1000,
                        args.explain_bytes,
                    )  # fmt: skip
                )
            )
            t.start()
            beside = stats(
                clients(server, model, "predictions", args.predictors, args.seconds, 0),
                args.seconds,
            )
            t.join()
            explained = stats(result["e"], args.seconds)
        except _Done:
            alone = beside = explained = None
        finally:
            server.stop()
    cpu = cpu_summary(describe_cpu())
    if lone is not None:
        print(
            f"CPU: {cpu}; a lone client explaining {lone['reviews']} held-out reviews of "
            f"{lone['words']} words: p50 {lone['p50_ms'] or 0:.0f} ms, "
            f"max {lone['max_ms'] or 0:.0f} ms (the same reviews' predictions: p50 "
            f"{lone['prediction_p50_ms'] or 0:.0f} ms), "
            f"at most {lone['passes']} passes, {lone['answered']} answered, "
            f"{lone['refused']} refused (statuses "
            f"{lone['statuses']}) {'; '.join(lone['errors'])}"
        )
    report = {
        "model": model,
        "cpu": cpu,
        "lone_review_explanations": lone,
        "predictors": args.predictors,
        "explainers": args.explainers,
        "seconds": args.seconds,
        "predictions_alone": alone,
        "predictions_beside_explanations": beside,
        "explanations": explained,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{model}_explain_load.json").write_text(json.dumps(report, indent=2))
    if alone is None or beside is None or explained is None:
        return 0
    print(f"CPU: {report['cpu']}; {args.predictors} prediction clients, {args.explainers} explanation clients, {args.seconds:g} s each phase")  # fmt: skip
    print("| | answered/s | p50 ms | p99 ms | refused 400 / 503 | refusal p99 ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, s in (("predictions alone", alone), ("predictions beside explanations", beside), ("explanations", explained)):  # fmt: skip
        p50, p99, rp = (
            f"{v:.0f}" if v is not None else "-"
            for v in (s["p50_ms"], s["p99_ms"], s["refusal_p99_ms"])
        )
        print(f"| {name} | {s['per_s']:.1f} | {p50} | {p99} | {s['refused']['400']} / {s['refused']['503']} | {rp} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
