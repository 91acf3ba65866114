"""python -m training.frequency --out artifacts/frequency [--config default|tiny]"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from training.common.manifest import write_manifest
from training.common.parity import ParityError
from training.frequency.config import CONFIGS, TrainConfig
from training.frequency.data import make_signal
from training.frequency.export import STEP_FILES
from training.frequency.model import SEQUENCE_INPUTS, SEQUENCE_OUTPUTS, STEP_INPUTS, STEP_OUTPUTS
from training.frequency.plots import plot_components, plot_window_error
from training.frequency.train import evaluate, train, train_signals


def handler_settings(cfg: TrainConfig) -> dict:
    """What the handler must know about the export (read from the manifest at load)."""
    return {
        "window": cfg.window,
        "sample_rate": cfg.signal.sample_rate,
        "frequencies": list(cfg.signal.frequencies),
        "hidden": cfg.hidden,
        "layers": cfg.layers,
        "sequence": {"inputs": list(SEQUENCE_INPUTS), "outputs": list(SEQUENCE_OUTPUTS)},
        "step": {"inputs": list(STEP_INPUTS), "outputs": list(STEP_OUTPUTS), "files": STEP_FILES},
        "head": "head.npz",
    }


def run(out: Path, cfg: TrainConfig, plots: bool = True) -> dict:
    from training.frequency.export import export_all

    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(
        missing_ok=True
    )  # no manifest until the new export passed parity
    signals = train_signals(cfg)
    model = train(cfg, signals)
    parity = export_all(model, out)
    (out / "parity.json").write_text(json.dumps(parity, indent=2) + "\n")
    model.head().save(out / "head.npz")

    train_eval = evaluate(model, signals[0], cfg)  # one of the signals it was trained on
    test_eval = evaluate(model, make_signal(cfg.signal, cfg.test_seed), cfg)
    metrics = {"config": asdict(cfg), "train": train_eval, "test": test_eval}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if plots:
        test = make_signal(cfg.signal, cfg.test_seed)
        plot_components(model, test, cfg, out / "test_components.png")
        plot_window_error(model, test, cfg, out / "test_window_error.png")
    summary = {
        "mse_window": {
            k: {"train": train_eval[k]["mse_window"], "test": v["mse_window"]}
            for k, v in test_eval.items()
        },
        "mse_stitched_test": {k: v["mse_stitched"] for k, v in test_eval.items()},
        "mse_stateful_test": {k: v["mse_stateful"] for k, v in test_eval.items()},
    }
    serve = ["model.pt", "model.onnx", "step.pt", "step.onnx", "head.npz"]
    parity_summary = {k: v["max_abs_diff"] for k, v in parity.items()}
    return write_manifest(out, "frequency", serve, handler_settings(cfg), summary, parity_summary)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--config", choices=sorted(CONFIGS), default="default")
    p.add_argument("--no-plots", action="store_true")
    # One thread by default: measured on a shared 2-core machine, a 2-thread LSTM step spun for
    # 10.7 s of CPU against 0.18 s with one thread (90x slower wall time) once other jobs ran.
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        manifest = run(args.out, CONFIGS[args.config], plots=not args.no_plots)
    except ParityError as e:
        print(f"frequency export failed the parity gate: {e}", file=sys.stderr)
        return 1
    print(json.dumps(manifest["metrics"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
