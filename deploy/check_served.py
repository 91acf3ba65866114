"""Ask the full-size models `make serve` left running what their training measured.

python -m deploy.check_served [--artifacts artifacts] [--config config.properties] [--keys-dir .]

Held-out inputs come from the training code's own splits (nothing here knows an answer but the
datasets' labels), each sent over REST and gRPC to the running TorchServe and given as a row to
the model's registered MLflow PyFunc (the version named in artifacts/<model>/manifest.json):
- sentiment: the first `REVIEWS` IMDB reviews of the test split training scored; at least as many
  right as a model with the report's held-out IMDB accuracy gets with probability 1 - `ALPHA`;
- digits: the whole held-out test split (the last 297 images); the report's accuracy, less `DIGITS_SLACK`;
- frequency: the whole test signal (its own noise seed) against its known components; each
  component's MSE at most the report's (the same signal, the same stitching) x `MSE_RATIO` + `MSE_SLACK`.
REST and gRPC answers must be equal, the PyFunc's equal to them within `PYFUNC_ATOL` (it runs the
handler's code in this process), and every answer must name the version artifacts/ holds.
Exit status 1 on any failure, 2 when no server answers. `make test` runs it when artifacts/ holds
every model (the README's flow: `make serve`, then `make test`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REVIEWS = 48
"""Held-out IMDB reviews asked (3 requests of 16 texts, the request limit)."""
ALPHA = 1e-3
"""A model as good as its report fails the review count this rarely (binomial)."""
DIGITS_SLACK = 0.01
"""Served accuracy on the whole test split may trail the report's by this (3 images of 297):
an image on the boundary may flip between the eager model the report scored and the export."""
MSE_RATIO, MSE_SLACK = 1.05, 1e-3
PYFUNC_ATOL = 1e-4
TEXTS_PER_REQUEST, IMAGES_PER_REQUEST = 16, 64


@dataclass
class Outcome:
    model: str
    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def check(self, ok: bool, what: str) -> None:
        (self.lines if ok else self.failures).append(what)


def binomial_floor(n: int, p: float, alpha: float = ALPHA) -> int:
    """The largest k with P(X < k) <= alpha for X ~ Binomial(n, p)."""
    below, k = 0.0, 0
    for i in range(n + 1):
        if below > alpha:
            break
        k = i
        below += math.comb(n, i) * p**i * (1 - p) ** (n - i)
    return k


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def differences(a: Any, b: Any, atol: float = 0.0, path: str = "") -> list[str]:
    """Where two JSON answers differ (numbers within `atol` are equal)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path or '.'}: keys {sorted(a)} vs {sorted(b)}"]
        return [d for k in a for d in differences(a[k], b[k], atol, f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        pairs = enumerate(zip(a, b, strict=True))
        return [d for i, (x, y) in pairs for d in differences(x, y, atol, f"{path}[{i}]")]
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):  # JSON's true is not 1
        return [] if type(a) is type(b) and a == b else [f"{path or '.'}: {a!r} vs {b!r}"]
    if isinstance(a, numbers) and isinstance(b, numbers):
        return [] if abs(a - b) <= atol else [f"{path}: {a} vs {b}"]
    return [] if a == b else [f"{path or '.'}: {_short(a)} vs {_short(b)}"]


@dataclass(frozen=True)
class Cases:
    """One model's held-out requests, how to read the answers, and the bar."""

    bodies: list[dict]
    judge: Callable[[list[Any], Outcome], None]
    """Checks the served answers (one per body) against the known truth."""


def sentiment_cases(manifest: dict, artifacts: Path) -> Cases:
    from training.sentiment.config import CONFIGS
    from training.sentiment.data import LABELS, load_splits

    metrics = manifest["metrics"]
    cfg = CONFIGS[metrics.get("config", "default")]
    # The test split and sample training scored (training/sentiment/pipeline.py), its IMDB reviews.
    test = load_splits(cfg.seed).test.sample(cfg.test_size, cfg.seed + 2)
    imdb = [i for i, s in enumerate(test.source) if s == "imdb"][:REVIEWS]
    texts, labels = [test.text[i] for i in imdb], [LABELS[int(test.label[i])] for i in imdb]
    bodies = [
        {"texts": texts[i : i + TEXTS_PER_REQUEST]} for i in range(0, len(texts), TEXTS_PER_REQUEST)
    ]
    accuracy = float(metrics["test_accuracy_imdb"])

    def judge(answers: list[Any], out: Outcome) -> None:
        got = [a["label"] for answer in answers for a in answer]
        right = sum(g == w for g, w in zip(got, labels, strict=True))
        need = binomial_floor(len(labels), accuracy)
        out.check(right >= need, f"{right}/{len(labels)} held-out IMDB reviews right "
                  f"(at least {need}: report's accuracy {accuracy:.4f})")  # fmt: skip

    return Cases(bodies, judge)


def digits_cases(manifest: dict, artifacts: Path) -> Cases:
    from training.digits.data import PIXEL_MAX, load_splits

    config = _training_config(artifacts)
    test = load_splits(config.get("train_images", 1500), config.get("val_images", 150))["test"]
    grids = np.rint(test.greys * PIXEL_MAX).astype(int).tolist()  # the dataset's own 0..16 values
    bodies = [
        {"images": grids[i : i + IMAGES_PER_REQUEST]}
        for i in range(0, len(grids), IMAGES_PER_REQUEST)
    ]
    accuracy = float(manifest["metrics"]["test_accuracy"])

    def judge(answers: list[Any], out: Outcome) -> None:
        got = [int(a["label"]) for answer in answers for a in answer]
        right = int(sum(g == w for g, w in zip(got, test.labels.tolist(), strict=True)))
        need = math.floor(len(got) * (accuracy - DIGITS_SLACK) + 1e-9)
        out.check(right >= need, f"{right}/{len(got)} held-out digits right "
                  f"(at least {need}: report's accuracy {accuracy:.4f} - {DIGITS_SLACK})")  # fmt: skip

    return Cases(bodies, judge)


def frequency_cases(manifest: dict, artifacts: Path) -> Cases:
    from training.frequency.config import SignalSpec
    from training.frequency.data import make_signal

    config = _training_config(artifacts)
    signal_cfg = config.get("signal", {})
    settings: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in signal_cfg.items()}  # fmt: skip
    spec = SignalSpec(**settings)
    signal = make_signal(spec, config.get("test_seed", 2))  # the signal the report's test MSE is of
    body = {
        "signal": signal.mixed.tolist(),
        "sample_rate": spec.sample_rate,
        "frequencies": list(spec.frequencies),
    }
    reported = manifest["metrics"]["mse_stitched_test"]

    def judge(answers: list[Any], out: Outcome) -> None:
        (answer,) = answers
        for i, component in enumerate(answer["components"]):
            name = f"{component['frequency']:g}Hz"
            served = np.asarray(component["signal"], dtype=np.float64)
            target = signal.targets[i].astype(np.float64)
            mse = float(np.mean((served - target) ** 2))
            corr = float(np.corrcoef(served, target)[0, 1])
            limit = reported[name] * MSE_RATIO + MSE_SLACK
            out.check(mse <= limit, f"{name}: MSE {mse:.4f} against the known component "
                      f"(report {reported[name]:.4f}, at most {limit:.4f}), correlation {corr:.3f}")  # fmt: skip

    return Cases([body], judge)


CASES: dict[str, Callable[[dict, Path], Cases]] = {
    "sentiment": sentiment_cases,
    "digits": digits_cases,
    "frequency": frequency_cases,
}


def _training_config(artifacts: Path) -> dict:
    path = artifacts / "metrics.json"
    return json.loads(path.read_text()).get("config", {}) if path.is_file() else {}


def _versions(answer: Any) -> set[str]:
    items = answer if isinstance(answer, list) else [answer]
    return {a["model"]["version"] for a in items if isinstance(a, dict) and "model" in a}


def check_model(name: str, artifacts: Path, rest, grpc, tracking_uri: str) -> Outcome:
    from handlers.manifest import read_manifest

    started = time.perf_counter()
    out = Outcome(name)
    manifest = read_manifest(artifacts)
    cases = CASES[name](manifest, artifacts)
    served = [rest.predict(name, body) for body in cases.bodies]
    cases.judge(served, out)
    versions = set().union(*(_versions(a) for a in served))
    out.check(versions == {manifest["version"]},
              f"served version {sorted(versions)} is artifacts/'s {manifest['version']}")  # fmt: skip
    over_grpc = [grpc.predict(name, body) for body in cases.bodies]
    diff = [d for a, b in zip(served, over_grpc, strict=True) for d in differences(a, b)]
    out.check(not diff, "REST and gRPC answers equal" + (f": {diff[:3]}" if diff else ""))
    record = manifest.get("mlflow")
    if record is None:
        out.check(False, "artifacts/ names no registered MLflow version (trained with --no-track?)")
    else:
        pyfunc = _pyfunc_answers(record, cases.bodies, tracking_uri)
        diff = [
            d for a, b in zip(served, pyfunc, strict=True) for d in differences(a, b, PYFUNC_ATOL)
        ]
        out.check(not diff, f"MLflow PyFunc {record['model_uri']} answers as served"
                  f" (within {PYFUNC_ATOL})" + (f": {diff[:3]}" if diff else ""))  # fmt: skip
    out.seconds = time.perf_counter() - started
    return out


def _pyfunc_answers(record: dict, bodies: list[dict], tracking_uri: str) -> list[Any]:
    import mlflow
    import pandas as pd

    mlflow.set_tracking_uri(record.get("tracking_uri", tracking_uri))
    model = mlflow.pyfunc.load_model(record["model_uri"])
    # One row per call, as the requests reached the server: one after another, each its own batch.
    return [model.predict(pd.DataFrame([body]))[0] for body in bodies]


def main(argv: list[str] | None = None) -> int:
    from clients import connect
    from clients.errors import ClientError
    from clients.settings import ClientSettings
    from handlers.registry import names
    from training.common.tracking import tracking_uri

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"))
    p.add_argument("--config", default="config.properties", help="the server's config.properties")
    p.add_argument("--keys-dir", type=Path, default=Path("."), help="where it wrote key_file.json")
    p.add_argument("--models", nargs="*", default=None, help="default: every registered model")
    args = p.parse_args(argv)
    settings = ClientSettings.from_properties(args.config, key_file=args.keys_dir / "key_file.json")
    models = args.models or names()
    missing = [m for m in models if m not in CASES]
    if missing:
        print(f"check_served: no held-out check for {missing}: add one to CASES", file=sys.stderr)
        return 1
    outcomes = []
    with connect("rest", settings) as rest, connect("grpc", settings) as grpc:
        try:
            rest.health()
        except ClientError as e:
            print(f"check_served: no server at {settings.inference_url} ({e}): run make serve",
                  file=sys.stderr)  # fmt: skip
            return 2
        for name in models:
            try:
                outcomes.append(
                    check_model(name, args.artifacts / name, rest, grpc, tracking_uri())
                )
            except (ClientError, KeyError, ValueError, OSError) as e:
                outcomes.append(Outcome(name, failures=[f"{type(e).__name__}: {e}"]))
    for o in outcomes:
        print(f"{o.model} ({o.seconds:.1f} s):")
        print("".join(f"  ok   {line}\n" for line in o.lines), end="")
        print("".join(f"  FAIL {line}\n" for line in o.failures), end="")
    failed = [o.model for o in outcomes if o.failures]
    print(f"check_served: {len(outcomes) - len(failed)}/{len(outcomes)} served models answer as "
          f"trained" + (f"; failed: {', '.join(failed)}" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
