"""One MLflow run per training run: params, per-step and final metrics, plots, parity and manifest.

Where runs go: `MLFLOW_TRACKING_URI` when set (a team's `mlflow server`), else an embedded SQLite
store, `mlruns.db` at the repo root, with artifacts under `mlruns/`. Nothing is sent anywhere by
default, and the store survives `make clean` (it is the history, not a build output).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from training.common.floors import QualityError
from training.common.machine import describe_cpu

# mlflow is imported where it is used: `--no-track` runs (e.g. on a bare GPU box) need no mlflow.

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT_PREFIX = "training-"
"""Experiment per model family: training-<model>."""
RUN_FILES = ("parity.json", "manifest.json", "metrics.json")


def default_tracking_uri() -> str:
    return f"sqlite:///{ROOT / 'mlruns.db'}"


def tracking_uri() -> str:
    return os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri()


def _flat(d: dict, prefix: str = "") -> dict:
    out: dict[str, object] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out |= _flat(v, f"{key}.")
        else:
            out[key] = v
    return out


def numeric_metrics(metrics: dict) -> dict[str, float]:
    """Flattened (a.b.c) numeric leaves; strings, lists and None stay out of the metric table, and
    so does the machine block (a run's params)."""
    return {
        k: float(v)
        for k, v in _flat({k: v for k, v in metrics.items() if k != "machine"}).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


class TrainingRun:
    """`with TrainingRun("<model>", params) as run:` opens the run; `run.logger()` gives the
    Trainer its MLflow logger (per-step metrics), the other methods log what training produced."""

    def __init__(self, model: str, params: dict, uri: str | None = None, register: bool = True):
        self.model = model
        self.params = params
        self.uri = uri or tracking_uri()
        self.register_exports = register
        self.run_id: str | None = None
        self.registered: dict | None = None

    def __enter__(self) -> TrainingRun:
        import mlflow
        from mlflow.tracking import MlflowClient

        mlflow.set_tracking_uri(self.uri)
        name = EXPERIMENT_PREFIX + self.model
        client = MlflowClient(self.uri)
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            # The embedded store keeps artifacts beside mlruns.db whatever the working directory.
            location = (ROOT / "mlruns").as_uri() if self.uri == default_tracking_uri() else None
            experiment_id = client.create_experiment(name, artifact_location=location)
        else:
            experiment_id = experiment.experiment_id
        self._run = mlflow.start_run(experiment_id=experiment_id, tags={"model": self.model})
        self.run_id = self._run.info.run_id
        # The CPU every timing of the run was measured on (model, class, speed flags).
        machine = {"machine": describe_cpu()}
        params = {k: str(v)[:6000] for k, v in _flat(self.params | machine).items()}
        mlflow.log_params(params)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        import mlflow

        if isinstance(exc, QualityError):  # the failed run says why: the figures and the floor
            mlflow.log_metrics({f"quality_floor.{k}": v for k, v in exc.figures.items()})
            mlflow.set_tag("quality_floor", str(exc)[:5000])
        mlflow.end_run("FAILED" if exc_type else "FINISHED")

    def logger(self):
        from lightning.pytorch.loggers import MLFlowLogger

        return MLFlowLogger(tracking_uri=self.uri, run_id=self.run_id)

    def log_history(self, rows: Iterable[tuple[str, float, int]], prefix: str = "") -> None:
        """Per-step metrics recorded elsewhere (a training process's CSV log), `prefix` + name."""
        import time

        from mlflow.entities import Metric
        from mlflow.tracking import MlflowClient

        assert self.run_id is not None, "log_history needs an open run"
        now = int(time.time() * 1000)
        batch = [Metric(prefix + key, value, now, step) for key, value, step in rows]
        client = MlflowClient(self.uri)
        for i in range(0, len(batch), 1000):  # MLflow's log_batch limit
            client.log_batch(self.run_id, metrics=batch[i : i + 1000])

    def log_results(self, out: Path, metrics: dict, plots: Iterable[str] = ()) -> None:
        """Final metrics, the PNG plots and the JSON reports of an artifact directory."""
        import mlflow

        mlflow.log_metrics(numeric_metrics(metrics))
        for name in (*plots, *RUN_FILES):
            if (Path(out) / name).is_file():
                mlflow.log_artifact(str(Path(out) / name), artifact_path="reports")

    def finish(self, out: Path, manifest: dict, metrics: dict, plots: Iterable[str]) -> dict:
        """After the manifest: register the export, record its version in manifest.json (the
        archive and the S3 release manifest carry it from there), then log the reports."""
        record = self.register(out, manifest)
        if record:
            manifest["mlflow"] = record
            (Path(out) / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        self.log_results(out, metrics, plots)
        return manifest

    def register(self, out: Path, manifest: dict) -> dict | None:
        """Register the parity-checked export as a new model version (training.registry)."""
        if not self.register_exports:
            return None
        from training.registry import register_export

        self.registered = register_export(self.model, Path(out), manifest, self.uri)
        return self.registered
