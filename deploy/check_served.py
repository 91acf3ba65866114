"""Ask the full-size models `make serve` left running what their training measured.

python -m deploy.check_served [--artifacts artifacts] [--config config.properties] [--keys-dir .]

Each model's questions come from `served_check` in training/<model>/heldout.py: held-out
inputs made by the training code's own split (nothing knows an answer but the dataset's labels),
judged against those labels and the training report's figures (sentiment: 48 test IMDB reviews,
binomial bar at the report's accuracy; digits: the whole test split, the report's accuracy less
1 %; tabular: the test split, the report's accuracy less 0.01; frequency: the held-out family
signals as one-shot requests, their correlations and absent ratios at most 0.01 worse than the
report's, and the documented example against its truth), and item by item against training's own predictions for those items
(heldout_predictions.json: the same label, the probability within 1e-3, frequency's per-signal
figures within 1e-3). Each request goes
over REST and gRPC to the running TorchServe and, as a row, to the model's registered MLflow
PyFunc (the version named in artifacts/<model>/manifest.json).
REST and gRPC answers must be equal, the PyFunc's equal to them within `PYFUNC_ATOL` (it runs the
handler's code in this process), and every answer must name the version artifacts/ holds.
Exit status 1 on any failure, 2 when no server answers. `make test` runs it when artifacts/ holds
every model (the README's flow: `make serve`, then `make test`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from handlers import registry
from training.common.heldout import HeldOut, Outcome, read_predictions, runtime_key

PYFUNC_ATOL = 1e-4
"""The PyFunc runs the handler's code in this process: its answers may differ in the last bits."""


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


def held_out(name: str, manifest: dict, artifacts: Path) -> HeldOut:
    """The model's questions: `served_check` in its training package's heldout.py."""
    package = f"training.{registry.get(name).name}"
    try:
        module = importlib.import_module(f"{package}.heldout")
    except ModuleNotFoundError as err:
        if err.name != f"{package}.heldout":
            raise
        raise LookupError(
            f"{name} has no held-out check: add {package}.heldout.served_check"
        ) from None
    return module.served_check(manifest, artifacts)


def _versions(answer: Any) -> set[str]:
    items = answer if isinstance(answer, list) else [answer]
    return {a["model"]["version"] for a in items if isinstance(a, dict) and "model" in a}


def served_runtime(name: str, artifacts: Path) -> str:
    """The runtime the server opens for `name` here: its model-config's, `auto` resolved on this
    CPU over the files artifacts/ holds (handlers/runtime.resolve_runtime)."""
    from handlers.archive import ArchiveConfig
    from handlers.runtime import resolve_runtime

    config = ArchiveConfig.read(registry.get(name).model_config.parent)
    kind = config.handler.get("runtime", "onnx")
    return resolve_runtime(kind, artifacts, "cpu")[0]


def check_model(name: str, artifacts: Path, rest, grpc, tracking_uri: str) -> Outcome:
    from handlers.manifest import read_manifest

    started = time.perf_counter()
    out = Outcome(name)
    manifest = read_manifest(artifacts)
    cases = held_out(name, manifest, artifacts)
    predictions = read_predictions(artifacts, manifest)
    runtime = served_runtime(name, artifacts)
    predicted = predictions["runtimes"].get(runtime_key(runtime))
    if predicted is None:
        raise LookupError(f"{name}: training saved no per-item predictions for runtime {runtime}")
    answered: list[tuple[str, list[Any]]] = []
    served = [rest.predict(name, body) for body in cases.bodies]
    answered.append((f"REST ({runtime})", served))
    cases.judge(served, out)
    versions = set().union(*(_versions(a) for a in served))
    out.check(versions == {manifest["version"]},
              f"served version {sorted(versions)} is artifacts/'s {manifest['version']}")  # fmt: skip
    over_grpc = [grpc.predict(name, body) for body in cases.bodies]
    answered.append((f"gRPC ({runtime})", over_grpc))
    diff = [d for a, b in zip(served, over_grpc, strict=True) for d in differences(a, b)]
    out.check(not diff, "REST and gRPC answers equal" + (f": {diff[:3]}" if diff else ""))
    record = manifest.get("mlflow")
    if record is None:
        out.check(False, "artifacts/ names no registered MLflow version (trained with --no-track?)")
    else:
        pyfunc = _pyfunc_answers(record, cases.bodies, tracking_uri)
        answered.append(("MLflow PyFunc", pyfunc))
        diff = [
            d for a, b in zip(served, pyfunc, strict=True) for d in differences(a, b, PYFUNC_ATOL)
        ]
        out.check(not diff, f"MLflow PyFunc {record['model_uri']} answers as served"
                  f" (within {PYFUNC_ATOL})" + (f": {diff[:3]}" if diff else ""))  # fmt: skip
    if cases.per_item is not None:
        for where, answers in answered:
            cases.per_item(answers, predicted, out, where)
    out.seconds = time.perf_counter() - started
    return out


def _pyfunc_answers(record: dict, bodies: list[dict], tracking_uri: str) -> list[Any]:
    import mlflow
    import pandas as pd

    mlflow.set_tracking_uri(record.get("tracking_uri", tracking_uri))
    # Downloaded into a folder that goes with the check (MLflow's own default is a temp folder it
    # never removes: 154 MB for sentiment, at every check).
    with tempfile.TemporaryDirectory(prefix="check-served-pyfunc-") as local:
        model = mlflow.pyfunc.load_model(record["model_uri"], dst_path=local)
        # One row per call, as the requests reached the server: one after another, each its own
        # batch.
        return [model.predict(pd.DataFrame([body]))[0] for body in bodies]


def main(argv: list[str] | None = None) -> int:
    from clients import connect
    from clients.errors import ClientError
    from clients.settings import ClientSettings
    from training.common.tracking import tracking_uri

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"))
    p.add_argument("--config", default="config.properties", help="the server's config.properties")
    p.add_argument("--keys-dir", type=Path, default=Path("."), help="where it wrote key_file.json")
    p.add_argument("--models", nargs="*", default=None, help="default: every registered model")
    args = p.parse_args(argv)
    settings = ClientSettings.from_properties(args.config, key_file=args.keys_dir / "key_file.json")
    models = args.models or registry.names()
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
            except (ClientError, KeyError, LookupError, ValueError, OSError) as e:
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
