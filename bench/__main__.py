"""Serving benchmark: for each model and runtime (TorchScript, ONNX Runtime), the bare artifact's
in-process throughput at the serving batch size and threads, then served throughput and
p50/p95/p99 latency through TorchServe at a few concurrencies, with the same requests, and where
the served time went (the handler's stage metrics and the frontend's queue time, per level).
Frequency is measured with JSON and with float32 bodies and answers, on 2,000-sample signals
asking for all four frequencies.

    python -m bench                      # artifacts/ (make train), reports/bench.{json,md}
    python -m bench --artifacts /tmp/tiny --requests 32 --concurrency 1,4
    python -m bench --models frequency --runtimes onnx --workers 1,2   # worker count compared
    python -m bench --models sentiment,frequency --bodies json   # lists are comma-separated

Archives are built here as <model>_ts / <model>_onnx (deploy.archive --runtime --name) and served
together by one TorchServe from build/bench/. In-process runs before the server starts, so the
two never share the CPU; the ratio served/in-process is measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

from tqdm import tqdm

from bench.inprocess import handler_throughput, in_process_throughput, serving_shape
from bench.report import markdown_table
from bench.served import served_load
from loadtests.payloads import Payloads, PayloadSettings

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_SUFFIX = {"torchscript": "ts", "onnx": "onnx"}
RUNTIME_FILE = {"torchscript": "model.pt", "onnx": "model.onnx"}
MODELS = ("sentiment", "frequency")


def bench_payloads(model: str, n: int, signal_samples: int = 2000) -> list[dict]:
    # One text (or signal) per request: the unit both sides count, whatever batching does. Every
    # signal has the same length and asks for every frequency: the shape the ratio is quoted for.
    settings = PayloadSettings(
        batch_sizes=(1,), signal_lengths=(signal_samples,), extract=((1.0, 3.0, 5.0, 7.0),)
    )
    payloads = Payloads(settings, seed=0)
    return [payloads.for_model(model) for _ in range(n)]


def set_workers(server, archive: str, workers: int) -> None:
    """Scale one model's workers (management API) and wait until they are all up."""
    import requests

    r = requests.put(
        f"{server.management_url}/models/{archive}",
        params={"min_worker": workers, "max_worker": workers, "synchronous": "true"},
        headers=server.auth("management"),
        timeout=300,
    )
    r.raise_for_status()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--artifacts", type=Path, default=ROOT / "artifacts", help="holds <model>/manifest.json"
    )
    # Lists are comma-separated, like --concurrency here and --models in the load test.
    p.add_argument("--models", default="sentiment,frequency", help="comma-separated models")
    p.add_argument(
        "--runtimes", default="torchscript,onnx", help="comma-separated: torchscript, onnx"
    )
    p.add_argument("--concurrency", default="1,4,16", help="comma-separated concurrent callers")
    p.add_argument(
        "--bodies",
        default="json,float32",
        help="comma-separated frequency body kinds: json, float32 (sentiment is always JSON)",
    )
    p.add_argument(
        "--workers", default="", help="comma-separated workers per model (default: model-config)"
    )
    p.add_argument("--signal-samples", type=int, default=2000, help="frequency request length")
    p.add_argument(
        "--requests", type=int, default=64, help="requests per served level (and in-process set)"
    )
    p.add_argument("--min-seconds", type=float, default=3.0, help="in-process timing floor")
    p.add_argument("--protocol", choices=("rest", "grpc"), default="rest")
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    p.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    args = p.parse_args(argv)
    args.models = _comma_list(args.models)
    args.runtimes = _comma_list(args.runtimes)
    for model in args.models:
        if model not in MODELS:
            p.error(f"unknown model {model!r} in --models (known: {', '.join(MODELS)})")
    for runtime in args.runtimes:
        if runtime not in RUNTIME_SUFFIX:
            p.error(f"unknown runtime {runtime!r} in --runtimes (known: torchscript, onnx)")
    args.bodies = _comma_list(args.bodies)
    for body in args.bodies:
        if body not in ("json", "float32"):
            p.error(f"unknown body kind {body!r} in --bodies (known: json, float32)")
    return args


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def plan(args: argparse.Namespace) -> list[tuple[str, str, Path]]:
    """(model, runtime, artifact dir) for every complete export found; missing ones are reported."""
    todo = []
    for model in args.models:
        art = args.artifacts / model
        if not (art / "manifest.json").exists():
            print(
                f"bench: no {art}/manifest.json (run `make train`); skipping {model}",
                file=sys.stderr,
            )
            continue
        for runtime in args.runtimes:
            if (art / RUNTIME_FILE[runtime]).exists():
                todo.append((model, runtime, art))
            else:
                print(
                    f"bench: {art} has no {RUNTIME_FILE[runtime]}; skipping {model}/{runtime}",
                    file=sys.stderr,
                )
    return todo


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    levels = [int(c) for c in _comma_list(args.concurrency)]
    worker_counts = [int(w) for w in _comma_list(args.workers)] or [None]
    todo = plan(args)
    if not todo:
        return 1
    from deploy.archive import build_archive
    from tests.support.torchserve import start_torchserve

    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    store = args.workdir / "archives"
    results, archives = [], {}
    rows = [
        (model, runtime, art, body, w)
        for model, runtime, art in todo
        for body in (args.bodies if model == "frequency" else ["json"])
        for w in worker_counts
    ]
    steps = tqdm(total=2 * len(todo) + len(rows) * len(levels), desc="bench", unit="step")
    in_process, handler_rps = {}, {}
    for model, runtime, art in todo:
        name = f"{model}_{RUNTIME_SUFFIX[runtime]}"
        steps.set_postfix_str(f"archive {name}")
        archives[name] = build_archive(
            model, art, store, runtime=runtime, name=name, build_dir=args.workdir / "build"
        )
        steps.update()
        steps.set_postfix_str(f"in-process {name}")
        payloads = bench_payloads(model, args.requests, args.signal_samples)
        in_process[name] = in_process_throughput(model, art, runtime, payloads, args.min_seconds)
        if model == "frequency":
            for body in args.bodies:
                handler_rps[(name, body)] = handler_throughput(
                    art, runtime, payloads, body, args.min_seconds
                )
        steps.update()
    for model, runtime, _, body, w in rows:
        name = f"{model}_{RUNTIME_SUFFIX[runtime]}"
        workers = w or serving_shape(model)[0].workers
        results.append(
            {
                "model": model,
                "runtime": runtime,
                "archive": name,
                "body": body,
                "workers": workers,
                "in_process": in_process[name],
                "handler_in_process": handler_rps.get((name, body)),
                "served": [],
            }
        )

    steps.set_postfix_str("starting TorchServe")
    server = start_torchserve(
        args.workdir / "serve", archives, overrides={"job_queue_size": "1000"}
    )
    try:
        from clients.settings import ClientSettings

        settings = ClientSettings(
            inference_url=server.inference_url,
            management_url=server.management_url,
            grpc_target=server.grpc_target,
            grpc_management_target=server.grpc_management_target,
            key_file=server.workdir / "key_file.json",
        )
        for row in sorted(results, key=lambda r: r["workers"]):
            set_workers(server, row["archive"], row["workers"])
            payloads = bench_payloads(row["model"], args.requests, args.signal_samples)
            for c in levels:
                steps.set_postfix_str(
                    f"served {row['archive']} {row['body']} w{row['workers']} x{c}"
                )
                level = served_load(
                    settings,
                    row["archive"],
                    payloads,
                    c,
                    args.protocol,
                    row["body"],
                    server.metrics_url,
                )
                row["served"].append(level)
                steps.update()
    finally:
        server.stop()
        steps.close()
    # In-process again once the server is gone: on a shared machine the load drifts, so the ratio
    # uses the mean of the runs before and after the served levels (both are reported).
    for model, runtime, art in todo:
        name = f"{model}_{RUNTIME_SUFFIX[runtime]}"
        payloads = bench_payloads(model, args.requests, args.signal_samples)
        again = in_process_throughput(model, art, runtime, payloads, args.min_seconds)
        first = in_process[name]
        first["rps_before_serving"], first["rps_after_serving"] = first["rps"], again["rps"]
        first["rps"] = (first["rps"] + again["rps"]) / 2

    for row in results:
        best = max((s["rps"] for s in row["served"]), default=0.0)
        row["served_over_in_process"] = (
            best / row["in_process"]["rps"] if row["in_process"]["rps"] else None
        )
    report = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1m": os.getloadavg()[0],
        },
        "settings": {
            "artifacts": str(args.artifacts),
            "requests": args.requests,
            "concurrency": levels,
            "protocol": args.protocol,
            "min_seconds": args.min_seconds,
            "signal_samples": args.signal_samples,
        },
        "versions": _versions(),
        "results": results,
    }
    table = markdown_table(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(report, indent=2))
    (args.out / "bench.md").write_text(table)
    print(table)
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.md'}")
    return 0 if all(s["errors"] == 0 for r in results for s in r["served"]) else 1


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {pkg: version(pkg) for pkg in ("torch", "onnxruntime", "torchserve")}


if __name__ == "__main__":
    sys.exit(main())
