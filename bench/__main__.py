"""Serving benchmark: for each model and runtime (fp32 ONNX, int8 ONNX, TorchScript), the bare
artifact's in-process throughput at the serving batch size and threads, then served throughput and
p50/p95/p99 latency through TorchServe over REST and gRPC at concurrencies up to 32, an open-loop
run at 70% of the best served throughput (p99/p50), the CPU the load generator, the frontend and
the workers used, and where a request's time goes.

    python -m bench                      # artifacts/ (make train), reports/bench.{json,md,png}
    python -m bench --artifacts /tmp/tiny --requests 32 --concurrency 1,4 --protocols rest

Archives are built here as <model>_<runtime> (deploy.archive --runtime --name) and served together
by one TorchServe from build/bench/. In-process runs before the server starts, so the two never
share the CPU; the ratio served/in-process is measured in the same run.
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

from bench.cpu import CpuMeter
from bench.inprocess import InProcess, sentiment_stages
from bench.metrics import breakdown, scrape
from bench.report import markdown_table, plot
from bench.served import paced_load, served_load
from handlers.runtime import RUNTIME_FILES
from loadtests.payloads import Payloads, PayloadSettings

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_SUFFIX = {"torchscript": "ts", "onnx": "onnx", "onnx-int8": "int8"}


def bench_payloads(model: str, n: int) -> list[dict]:
    # One text per request: a request is the unit both sides count, whatever batching does.
    payloads = Payloads(PayloadSettings(batch_sizes=(1,)), seed=0)
    return [payloads.for_model(model) for _ in range(n)]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--artifacts", type=Path, default=ROOT / "artifacts", help="holds <model>/manifest.json"
    )
    p.add_argument("--models", nargs="+", default=["sentiment", "frequency"])
    p.add_argument(
        "--runtimes", nargs="+", default=["onnx", "onnx-int8"], choices=sorted(RUNTIME_SUFFIX)
    )
    p.add_argument("--concurrency", default="1,4,16,32", help="comma-separated concurrent callers")
    p.add_argument(
        "--requests",
        type=int,
        default=64,
        help="requests per served level (at least 4 per client) and the in-process set",
    )
    p.add_argument("--min-seconds", type=float, default=3.0, help="in-process timing floor")
    p.add_argument("--protocols", nargs="+", choices=("rest", "grpc"), default=["rest", "grpc"])
    p.add_argument(
        "--paced",
        type=float,
        default=0.7,
        help="open-loop run at this fraction of the best served throughput (0: skip)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="model-config override for every archive and the in-process run, e.g. "
        "maxBatchDelay=5 or handler.intra_op_spinning=true (repeatable)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    p.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    return p.parse_args(argv)


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
        files = json.loads((art / "manifest.json").read_text())["files"]
        for runtime in args.runtimes:
            if RUNTIME_FILES[runtime] in files:
                todo.append((model, runtime, art))
            else:
                print(
                    f"bench: {art} has no {RUNTIME_FILES[runtime]}; skipping {model}/{runtime}",
                    file=sys.stderr,
                )
    return todo


def measure_level(server, settings, row: dict, payloads: list[dict], c: int, proto: str) -> dict:
    """One closed-loop level, with the CPU each party used and TorchServe's counters around it."""
    meter = CpuMeter(server.process.pid if server.process else None)
    before = scrape(server.metrics_url)
    meter.start()
    result = served_load(settings, row["archive"], payloads, c, proto)
    result["cpu"] = meter.stop()
    result["breakdown"] = breakdown(before, scrape(server.metrics_url), row["archive"])
    return result


def parse_overrides(items: list[str]) -> dict:
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, not {item!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    overrides = parse_overrides(args.set)
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    todo = plan(args)
    if not todo:
        return 1
    from deploy.archive import build_archive
    from tests.support.torchserve import start_torchserve

    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    store = args.workdir / "archives"
    results, archives, bare = [], {}, {}
    per_row = len(args.protocols) * (len(levels) + (args.paced > 0))
    steps = tqdm(total=len(todo) * (2 + per_row), desc="bench", unit="step")
    for model, runtime, art in todo:
        name = f"{model}_{RUNTIME_SUFFIX[runtime]}"
        steps.set_postfix_str(f"archive {name}")
        archives[name] = build_archive(
            model,
            art,
            store,
            runtime=runtime,
            name=name,
            build_dir=args.workdir / "build",
            overrides=overrides,
        )
        steps.update()
        steps.set_postfix_str(f"in-process {name}")
        payloads = bench_payloads(model, args.requests)
        row = {
            "model": model,
            "runtime": runtime,
            "archive": name,
            "in_process": None,
            "served": [],
            "paced": [],
        }
        bare[name] = InProcess(model, art, runtime, payloads, overrides)
        row["in_process"] = bare[name].time(args.min_seconds)
        if model == "sentiment":
            row["stages"] = sentiment_stages(art, runtime, payloads, overrides=overrides)
        results.append(row)
        steps.update()

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
        for row in results:
            for proto in args.protocols:
                for c in levels:
                    steps.set_postfix_str(f"served {row['archive']} {proto} x{c}")
                    payloads = bench_payloads(row["model"], max(args.requests, 4 * c))
                    level = measure_level(server, settings, row, payloads, c, proto)
                    # The bare model again, right after: on shared cores the neighbours' load
                    # drifts, and a ratio is only fair between two figures taken side by side.
                    level["in_process_rps"] = bare[row["archive"]].time(args.min_seconds)["rps"]
                    row["served"].append(level)
                    steps.update()
                if args.paced > 0:
                    best = max(s["rps"] for s in row["served"] if s["protocol"] == proto)
                    rate = args.paced * best
                    steps.set_postfix_str(f"paced {row['archive']} {proto} {rate:.1f}/s")
                    n = max(args.requests, int(rate * 5))  # at least ~5 s of schedule
                    row["paced"].append(
                        paced_load(
                            settings, row["archive"], bench_payloads(row["model"], n), rate, proto
                        )
                    )
                    steps.update()
    finally:
        server.stop()
        steps.close()

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
        },
        "settings": {
            "artifacts": str(args.artifacts),
            "requests": args.requests,
            "concurrency": levels,
            "protocols": args.protocols,
            "min_seconds": args.min_seconds,
            "paced_fraction": args.paced,
            "overrides": overrides,
        },
        "versions": _versions(),
        "results": results,
    }
    table = markdown_table(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(report, indent=2))
    (args.out / "bench.md").write_text(table)
    plot(report, args.out / "bench.png")
    print(table)
    print(f"wrote {args.out}/bench.json, bench.md and bench.png")
    errors = [s["errors"] for r in results for s in r["served"] + r["paced"]]
    return 0 if not any(errors) else 1


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {pkg: version(pkg) for pkg in ("torch", "onnxruntime", "torchserve")}


if __name__ == "__main__":
    sys.exit(main())
