"""python -m training.sentiment.choose --out DIR [--variant NAME ...] [--reuse NAME=model.onnx]

The recipe's choices (encoder depth, the float32 CPUs' review budget) made on the selection
split. Each variant is the default recipe as this machine trains it (`pipeline.fitted_to`) with
one thing changed; it is fine-tuned, exported to ONNX and scored on the whole validation split
(the selection split: never trained on; the temperature is fitted on 600 of its reviews, which
does not move a label), each review alone, as served. The test split is never loaded.

The rule, fixed before any variant was run: **the cheapest variant whose selection IMDB accuracy
is at most `TOLERANCE` below the most accurate variant's.** Cheaper means fewer encoder layers
(serving cost) first, then fewer training reviews (training time). Each figure comes with its
binomial 95 % interval and each variant's difference from the most accurate one with a paired
bootstrap 95 % interval over the same reviews. `selection.json` in DIR holds everything, one
line per variant as it finishes (a run cut short keeps what it measured; `--reuse` scores an
existing export, e.g. the default recipe's, without training it again).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from training.common.floors import wilson
from training.common.machine import describe_cpu
from training.sentiment.config import DEFAULT, SentimentConfig, at_depth

TOLERANCE = 0.005
"""Accuracy (IMDB, selection split) a cheaper variant may give up against the most accurate."""

BOOTSTRAP = 2000


@dataclass(frozen=True)
class Variant:
    name: str
    layers: int
    """Encoder layers kept (6: all of MiniLM-L6's)."""
    train_size: int | None
    """Reviews fine-tuned on; None: the recipe's on this machine."""

    def config(self, base: SentimentConfig) -> SentimentConfig:
        cfg = at_depth(replace(base, encoder_layers=None), self.layers)
        if self.train_size is not None:
            cfg = replace(cfg, train_size=self.train_size)
        return replace(cfg, name=f"choose-{self.name}", progress=False)

    def cost(self, base: SentimentConfig) -> tuple[int, int]:
        return (self.layers, self.train_size or base.train_size)


VARIANTS = {
    "layers-6": Variant("layers-6", 6, None),
    "layers-5": Variant("layers-5", 5, None),
    "layers-4": Variant("layers-4", 4, None),
    "layers-3": Variant("layers-3", 3, None),
    "reviews-6000": Variant("reviews-6000", 6, 6000),
    "reviews-12000": Variant("reviews-12000", 6, 12000),
}
"""One change each from the recipe as this machine trains it: the depth (at its review budget),
or the budget (at six layers)."""


def paired_interval(a: np.ndarray, b: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """The 95 % paired bootstrap interval of mean(a) - mean(b) over the same items."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(BOOTSTRAP, len(a)))
    diffs = a[idx].mean(axis=1) - b[idx].mean(axis=1)
    return (float(np.quantile(diffs, 0.025)), float(np.quantile(diffs, 0.975)))


def choose(results: dict[str, dict], base: SentimentConfig) -> dict:
    """The rule applied to scored variants: the verdict and each variant's standing."""
    best = max(results, key=lambda n: results[n]["accuracy_imdb"])
    top = np.asarray(results[best]["correct_imdb"], np.float64)
    standing = {}
    for name, r in results.items():
        mine = np.asarray(r["correct_imdb"], np.float64)
        gap = results[best]["accuracy_imdb"] - r["accuracy_imdb"]
        standing[name] = {
            "accuracy_imdb": r["accuracy_imdb"],
            "interval": r["interval_imdb"],
            "below_best": round(gap, 4),
            "below_best_interval": [round(-x, 4) for x in reversed(paired_interval(mine, top))],
            "within_tolerance": gap <= TOLERANCE + 1e-12,
        }
    eligible = [n for n in results if standing[n]["within_tolerance"]]
    chosen = min(eligible, key=lambda n: VARIANTS[n].cost(base))
    return {"rule": f"cheapest variant within {TOLERANCE} of the best selection IMDB accuracy",
            "best": best, "chosen": chosen, "standing": standing}  # fmt: skip


def score(model_onnx: Path, selection, rows, threads: int) -> dict:
    from training.sentiment.evaluate import onnx_predict

    logits = onnx_predict(model_onnx, rows, threads, outputs=("logits",)).logits
    correct = logits.argmax(axis=1) == selection.label
    imdb = selection.source == "imdb"
    k, n = int(correct[imdb].sum()), int(imdb.sum())
    return {
        "accuracy_imdb": round(k / n, 6),
        "interval_imdb": [round(x, 4) for x in wilson(k, n)],
        "reviews_imdb": n,
        "accuracy": round(float(correct.mean()), 6),
        "reviews": len(rows),
        "correct_imdb": correct[imdb].astype(int).tolist(),
    }


def train_variant(variant: Variant, base: SentimentConfig, out: Path, splits) -> Path:
    """Fine-tune one variant (checkpoints in its folder, so a cut run resumes) and export it."""
    import torch

    from training.sentiment.export import export_onnx
    from training.sentiment.model import build_model, load_tokenizer
    from training.sentiment.pipeline import training_rows
    from training.sentiment.train import fine_tune

    cfg = variant.config(base)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    train = splits.train.sample(cfg.train_size, cfg.seed)
    tokenizer = load_tokenizer()
    model = build_model(cfg)
    folder = out / variant.name
    folder.mkdir(parents=True, exist_ok=True)
    fine_tune(model, training_rows(tokenizer, train.text, cfg), train.label, cfg,
              tokenizer.pad_token_id, out=folder)  # fmt: skip
    export_onnx(model, folder / "model.onnx", model.encoder.config.vocab_size,
                tokenizer.pad_token_id)  # fmt: skip
    return folder / "model.onnx"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.sentiment.choose", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--variant", action="append", choices=sorted(VARIANTS),
                        help="a variant to score (repeatable; default: all)")  # fmt: skip
    parser.add_argument("--reuse", action="append", default=[], metavar="NAME=model.onnx",
                        help="score this export for variant NAME instead of training it")  # fmt: skip
    args = parser.parse_args(argv)

    from training.sentiment.data import load_splits
    from training.sentiment.model import load_tokenizer
    from training.sentiment.pipeline import fitted_to

    base = fitted_to(DEFAULT)
    reuse = dict(item.split("=", 1) for item in args.reuse)
    names = args.variant or list(VARIANTS)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "selection.json"
    record = json.loads(path.read_text()) if path.exists() else {"variants": {}}
    splits = load_splits(base.seed)
    selection = splits.validation
    tokenizer = load_tokenizer()
    from training.sentiment.encoding import token_rows

    rows = token_rows(tokenizer, selection.text, base.max_length, base.head_tokens)
    for name in names:
        if name in record["variants"]:
            continue
        started = time.perf_counter()
        variant = VARIANTS[name]
        onnx = (
            Path(reuse[name]) if name in reuse else train_variant(variant, base, args.out, splits)
        )
        result = score(onnx, selection, rows, base.threads)
        result |= {"layers": variant.layers, "train_size": variant.cost(base)[1],
                   "seconds": round(time.perf_counter() - started, 1),
                   "reused": name in reuse}  # fmt: skip
        record["variants"][name] = result
        record["machine"] = describe_cpu()
        record["split"] = (
            f"selection (validation), {len(rows)} reviews, {result['reviews_imdb']} IMDB"
        )
        if len(record["variants"]) > 1:
            record["verdict"] = choose(record["variants"], base)
        path.write_text(json.dumps(record, indent=1) + "\n")
        lo, hi = result["interval_imdb"]
        print(f"{name}: selection IMDB accuracy {result['accuracy_imdb']:.4f} [{lo:.4f}, {hi:.4f}] "
              f"({result['seconds']:.0f} s)", flush=True)  # fmt: skip
    if "verdict" in record:
        v = record["verdict"]
        print(f"rule: {v['rule']}; best {v['best']}, chosen {v['chosen']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
