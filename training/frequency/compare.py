"""Compare frequency exports (e.g. lstm against lstm-attention) on the same held-out signals:
the served-family figures of both modes from their metrics.json (training/frequency/quality.py),
and the latency of the served path (FrequencyEngine over ONNX Runtime, in process) on one request.

    python -m training.frequency.compare artifacts/frequency artifacts/frequency-attention \\
        [--out reports/frequency_arch.json] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import yaml

from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.settings import parse_settings
from handlers.kits.signal.codec import SignalRequest
from training.common.manifest import read_manifest
from training.frequency.config import SignalSpec
from training.frequency.data import make_signal
from training.frequency.quality import figures

ROOT = Path(__file__).resolve().parents[2]


def served_latency(artifacts: Path, repeats: int, seconds: float, threads: int) -> dict:
    """Median and p90 wall time of engine.windows for one request of all frequencies."""
    manifest = read_manifest(artifacts)
    serving = yaml.safe_load((ROOT / "handlers/frequency/model-config.yaml").read_text())["handler"]
    settings = parse_settings(manifest, serving | {"threads": threads})
    engine = FrequencyEngine(settings, artifacts)
    spec = SignalSpec(duration_s=seconds)
    signal = make_signal(spec, seed=2).mixed
    freqs = settings.frequencies
    req = SignalRequest(signal, settings.sample_rate, freqs, tuple(range(len(freqs))))
    engine.windows([req])  # warm-up: first-run allocations and graph optimisation
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        engine.windows([req])
        times.append(time.perf_counter() - t)
    return {
        "request": f"{seconds:g} s at {settings.sample_rate} Hz, {len(freqs)} frequencies",
        "runtime": settings.runtime,
        "threads": threads,
        "p50_ms": round(1000 * float(np.median(times)), 2),
        "p90_ms": round(1000 * float(np.percentile(times, 90)), 2),
    }


def summary(artifacts: Path, repeats: int, seconds: float, threads: int) -> dict:
    metrics = json.loads((artifacts / "metrics.json").read_text())
    test = figures(metrics["quality"])
    return {
        "artifacts": str(artifacts),
        "arch": metrics["config"].get("arch", "lstm"),
        "trained_steps": metrics.get("trained_steps"),
        "train_seconds": metrics.get("train_seconds"),
        "heldout_family": {k: round(v, 4) for k, v in test.items()},
        "latency": served_latency(artifacts, repeats, seconds, threads),
    }


def table(rows: list[dict]) -> str:
    names = list(rows[0]["heldout_family"])
    head = "| arch | steps | " + " | ".join(names) + " | served p50 ms |"
    lines = [head, "|" + "---|" * (3 + len(names))]
    for r in rows:
        cells = [r["arch"], str(r["trained_steps"])]
        cells += [f"{r['heldout_family'][n]:.4f}" for n in names]
        cells.append(f"{r['latency']['p50_ms']:.1f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("artifacts", nargs="+", type=Path)
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "frequency_arch.json")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--seconds", type=float, default=10.0, help="request length (s)")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    rows = [summary(a, args.repeats, args.seconds, args.threads) for a in args.artifacts]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2) + "\n")
    print(table(rows))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
