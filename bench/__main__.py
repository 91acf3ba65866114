"""Serving benchmark: for each model and runtime (fp32 ONNX, int8 ONNX, TorchScript), the bare
artifact's in-process throughput at the serving batch size and threads, then served throughput and
p50/p95/p99 latency through TorchServe over REST and gRPC at concurrencies up to 32, an open-loop
run at 70% of the best served throughput (p99/p50), the CPU the load generator, the frontend and
the workers used, and where a request's time goes. Each model's requests are one fixed shape (its
samples.py `bench_feed` hook, sized by the options its `bench_arguments` hook adds); a model whose
`BENCH_BODIES` names float32 is also sent float32 bodies with float32 answers (REST), and for each
body kind its handler's whole path is timed in-process against the bare model; a model with a
`stages` hook gets its inference stage taken apart in-process instead. The bare model is each
model's tools/<model>/bench.py `batches` hook; a model without one is skipped (said on stderr).

    python -m bench                      # artifacts/ (make train), reports/bench.{json,md,png}
    python -m bench --artifacts /tmp/tiny --requests 32 --concurrency 1,4 --protocols rest
    python -m bench --models MODEL --runtimes onnx --bodies json,float32 --workers 1,2

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

from bench import ceiling
from bench.cpu import CpuMeter
from bench.inprocess import (
    InProcess,
    Replicas,
    bench_parts,
    handler_throughput,
    serving_shape,
    stage_times,
)
from bench.metrics import breakdown, scrape
from bench.report import failures, markdown_table, plot
from bench.served import paced_load, served_load
from clients.pipes import run_cli
from handlers.runtime import RUNTIME_FILES
from loadtests.payloads import bench_feed
from tools.registry import get, names
from training.common.machine import describe_cpu

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_SUFFIX = {"torchscript": "ts", "onnx": "onnx", "onnx-int8": "int8"}
MODELS = tuple(names())
PROTOCOLS = ("rest", "grpc")
BODIES = ("json", "float32")


def bench_payloads(model: str, n: int, options: dict) -> list[dict]:
    # One unit per request, one shape for every request (each model's bench_feed hook): the unit
    # both sides count, whatever batching does, and the shape the ratio is quoted for. `options`:
    # what the models' bench_arguments hooks added, as parsed.
    return bench_feed(model, n, **options)


def model_bodies(model: str, bodies: list[str]) -> list[str]:
    """The body kinds a model's rows use: those of --bodies it takes (BENCH_BODIES), else JSON."""
    kinds = get(model).samples().bench_bodies
    return [b for b in bodies if b in kinds] if kinds else ["json"]


def set_workers(server, archive: str, workers: int) -> None:
    """Scale one model's workers (management API) and wait until they are all up."""
    import requests

    r = requests.put(
        f"{server.management_url}/models/{archive}",
        params={"min_worker": str(workers), "max_worker": str(workers), "synchronous": "true"},
        headers=server.auth("management"),
        timeout=300,
    )
    r.raise_for_status()


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


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
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated models")
    p.add_argument(
        "--runtimes",
        default="onnx,onnx-int8",
        help=f"comma-separated: {', '.join(sorted(RUNTIME_SUFFIX))}",
    )
    p.add_argument("--concurrency", default="1,4,16,32", help="comma-separated concurrent callers")
    p.add_argument(
        "--bodies",
        default="json,float32",
        help="comma-separated body kinds: json, float32 (float32 bodies and answers go over "
        "REST; a model whose samples.py has no BENCH_BODIES is always JSON)",
    )
    p.add_argument(
        "--workers",
        default="",
        help="comma-separated workers per model, every level repeated at each "
        "(default: the model-config's minWorkers)",
    )
    before = {a.dest for a in p._actions}
    for model in MODELS:
        hook = get(model).samples().bench_arguments
        if hook is not None:
            hook(p.add_argument_group(f"{model} options"))
    model_options = sorted({a.dest for a in p._actions} - before)
    p.add_argument(
        "--requests",
        type=int,
        default=64,
        help="requests per served level (at least 4 per client) and the in-process set",
    )
    p.add_argument("--min-seconds", type=float, default=3.0, help="in-process timing floor")
    p.add_argument("--protocols", default="rest,grpc", help="comma-separated: rest, grpc")
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
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="KEY=VALUE[,KEY=VALUE]",
        help="also serve every archive with these model-config settings, side by side in the same "
        "run (REST only), e.g. maxBatchDelay=20 against the model-config's own (repeatable)",
    )
    p.add_argument(
        "--oip-seconds",
        type=float,
        default=20.0,
        help="sentiment served by TorchServe and by the Open Inference Protocol server side by "
        "side (bench/oip.py): each runtime's closed-loop run lasts this long (0: skip)",
    )
    p.add_argument("--oip-rounds", type=int, default=2, help="rounds of that comparison")
    p.add_argument(
        "--ceiling-rounds",
        type=int,
        default=2,
        help="a model with float32 bodies (frequency) against a no-op model of its request and "
        "answer sizes in the same TorchServe (bench/ceiling.py), per body and protocol: rounds of "
        "the pair, best of each (0: skip)",
    )
    p.add_argument(
        "--ceiling-clients", type=int, default=16, help="closed-loop clients of that comparison"
    )
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    p.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench")
    args = p.parse_args(argv)
    args.model_options = {k: getattr(args, k) for k in model_options}
    for option, what, known in (
        ("models", "model", MODELS),
        ("runtimes", "runtime", tuple(sorted(RUNTIME_SUFFIX))),
        ("protocols", "protocol", PROTOCOLS),
        ("bodies", "body kind", BODIES),
    ):
        items = _comma_list(getattr(args, option))
        for item in items:
            if item not in known:
                p.error(f"unknown {what} {item!r} in --{option} (known: {', '.join(known)})")
        setattr(args, option, items)
    try:
        args.levels = [int(c) for c in _comma_list(args.concurrency)]
        args.worker_counts = [int(w) for w in _comma_list(args.workers)]
    except ValueError as e:
        p.error(f"--concurrency and --workers take comma-separated integers ({e})")
    return args


def plan(args: argparse.Namespace) -> list[tuple[str, str, Path]]:
    """(model, runtime, artifact dir) for every complete export found; missing ones are reported."""
    todo = []
    for model in args.models:
        if bench_parts(model) is None:
            print(
                f"bench: tools/{model}/bench.py declares no BENCH (no bare-model figure to "
                f"compare against); skipping {model}",
                file=sys.stderr,
            )
            continue
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


class LevelProbe:
    """CPU per party and TorchServe's counters around the timed calls of one level (the warm-up
    left out): started and stopped by served_load."""

    def __init__(self, server, archive: str):
        self.server, self.archive = server, archive
        self.meter = CpuMeter(server.process.pid if server.process else None)

    def start(self) -> None:
        self.before = scrape(self.server.metrics_url)
        self.meter.start()

    def stop(self, seconds: float) -> dict:
        cpu = self.meter.stop()
        after = scrape(self.server.metrics_url)
        return {"cpu": cpu, "breakdown": breakdown(self.before, after, self.archive, seconds)}


def measure_level(server, settings, row: dict, payloads: list[dict], c: int, proto: str) -> dict:
    """One closed-loop level, with the CPU each party used and TorchServe's counters around it."""
    return served_load(
        settings,
        row["archive"],
        payloads,
        c,
        proto,
        body=row["body"],
        probe=LevelProbe(server, row["archive"]),
    )


def parse_overrides(items: list[str]) -> dict:
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set wants KEY=VALUE, not {item!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def parse_variants(items: list[str]) -> list[tuple[str, dict]]:
    """(label, overrides) per --variant: `maxBatchDelay=20` or `a=1,b=2`."""
    return [(item.strip(), parse_overrides(_comma_list(item))) for item in items if item.strip()]


def variant_suffix(label: str) -> str:
    """An archive-name-safe form of a variant label: maxBatchDelay=20 -> maxBatchDelay20."""
    return "".join(ch for ch in label if ch.isalnum())


def row_protocols(args: argparse.Namespace, body: str, variant: str | None = None) -> list[str]:
    """float32 bodies and answers are a REST form (the gRPC API carries JSON-shaped payloads);
    a variant is compared over REST only."""
    return ["rest"] if body == "float32" or variant else list(args.protocols)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    overrides = parse_overrides(args.set)
    # The model-config's own settings (None), then each --variant on top of them.
    variants: list[tuple[str | None, dict]] = [(None, {})] + parse_variants(args.variant)
    levels = args.levels
    todo = plan(args)
    if not todo:
        return 1
    from deploy.archive import build_archive
    from tests.support.torchserve import start_torchserve

    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    store = args.workdir / "archives"
    results, archives, bare = [], {}, {}
    # One row per archive × variant × body kind × worker count; a model without BENCH_BODIES is
    # JSON only; a variant runs at the model-config's workers.
    plan_rows = [
        (model, runtime, art, label, body, workers)
        for model, runtime, art in todo
        for label, extra in variants
        for body in model_bodies(model, args.bodies)
        for workers in (
            (args.worker_counts if label is None else [])
            or [serving_shape(model, overrides | extra)[0].workers]
        )
    ]
    per_row = sum(
        len(row_protocols(args, body, label))
        * (len(levels) + (args.paced > 0 and body == "json" and label is None))
        for *_, label, body, _w in plan_rows
    )
    steps = tqdm(total=2 * len(todo) * len(variants) + per_row, desc="bench", unit="step")
    in_process, stages, handler, bare_args, lone = {}, {}, {}, {}, {}
    noops: dict[str, tuple[str, Path]] = {}  # model archive -> (no-op archive name, its .mar)

    def archive_name(model: str, runtime: str, label: str | None) -> str:
        base = f"{model}_{RUNTIME_SUFFIX[runtime]}"
        return base if label is None else f"{base}_{variant_suffix(label)}"

    for model, runtime, art in todo:
        for label, extra in variants:
            name, settings_v = archive_name(model, runtime, label), overrides | extra
            steps.set_postfix_str(f"archive {name}")
            archives[name] = build_archive(
                model,
                art,
                store,
                runtime=runtime,
                name=name,
                build_dir=args.workdir / "build",
                overrides=settings_v,
            )
            steps.update()
            steps.set_postfix_str(f"in-process {name}")
            payloads = bench_payloads(model, args.requests, args.model_options)
            bare_args[name] = (model, art, runtime, payloads, settings_v)
            bare[name] = InProcess(*bare_args[name])
            in_process[name] = bare[name].time(args.min_seconds)
            lone[name] = bare[name].lone_latency(args.min_seconds)
            if label is not None:  # the variant's own serving, against the same bare model
                steps.update()
                continue
            if (parts := bench_parts(model)) is not None and parts.stages is not None:
                stages[name] = stage_times(model, art, runtime, payloads, overrides=overrides)
            elif get(model).samples().bench_bodies:
                for body in model_bodies(model, args.bodies):
                    handler[(name, body)] = handler_throughput(
                        model, art, runtime, payloads, body, args.min_seconds, overrides
                    )
                if args.ceiling_rounds > 0 and not any(n.startswith(model) for n in noops):
                    steps.set_postfix_str(f"no-op of {name}'s sizes")
                    service = ceiling.in_process_service(model, art, runtime, overrides)
                    prebuilt = ceiling.answers(service, payloads[0], model)
                    noop = f"noop_{name}"
                    noops[name] = (
                        noop,
                        ceiling.build_noop(store, noop, archives[name], prebuilt, args.workdir),
                    )
            steps.update()
    for model, runtime, _art, label, body, workers in plan_rows:
        name = archive_name(model, runtime, label)
        row = {
            "model": model,
            "runtime": runtime,
            "archive": name,
            "variant": label,
            "body": body,
            "workers": workers,
            "in_process": in_process[name],
            "lone_in_process": lone[name],
            "served": [],
            "paced": [],
        }
        if name in stages:
            row["stages"] = stages[name]
        if (name, body) in handler:
            row["handler_in_process"] = handler[(name, body)]
        results.append(row)

    steps.set_postfix_str("starting TorchServe")
    server = start_torchserve(
        args.workdir / "serve",
        archives | dict(noops.values()),
        overrides={"job_queue_size": "1000"},
    )
    ceilings: list[dict] = []
    replicas: dict[tuple[str, int], Replicas] = {}

    def reference(row: dict):
        """The bare model in the row's serving shape: one process per TorchServe worker."""
        if row["workers"] == 1:
            return bare[row["archive"]]
        key = (row["archive"], row["workers"])
        if key not in replicas:
            replicas[key] = Replicas(row["workers"], *bare_args[row["archive"]])
            row["in_process"] = replicas[key].time(args.min_seconds)
        return replicas[key]

    try:
        settings = server.client_settings()
        workers_now: dict[str, int] = {}
        for row in sorted(results, key=lambda r: r["workers"]):
            if workers_now.get(row["archive"]) != row["workers"]:
                steps.set_postfix_str(f"{row['archive']}: {row['workers']} workers")
                set_workers(server, row["archive"], row["workers"])
                workers_now[row["archive"]] = row["workers"]
            tag = f"{row['archive']} {row['body']} w{row['workers']}"
            for proto in row_protocols(args, row["body"], row["variant"]):
                for c in levels:
                    steps.set_postfix_str(f"served {tag} {proto} x{c}")
                    n = max(args.requests, 4 * c)
                    payloads = bench_payloads(row["model"], n, args.model_options)
                    level = measure_level(server, settings, row, payloads, c, proto)
                    # The bare model again, right after: on shared cores the neighbours' load
                    # drifts, and a ratio is only fair between two figures taken side by side.
                    level["in_process_rps"] = reference(row).time(args.min_seconds)["rps"]
                    row["served"].append(level)
                    steps.update()
                if args.paced > 0 and row["body"] == "json" and row["variant"] is None:
                    best = max(s["rps"] for s in row["served"] if s["protocol"] == proto)
                    rate = args.paced * best
                    steps.set_postfix_str(f"paced {tag} {proto} {rate:.1f}/s")
                    n = max(args.requests, int(rate * 5))  # at least ~5 s of schedule
                    row["paced"].append(
                        paced_load(
                            settings,
                            row["archive"],
                            bench_payloads(row["model"], n, args.model_options),
                            rate,
                            proto,
                        )
                    )
                    steps.update()
        for name, (noop, _mar) in noops.items():
            model = next(r["model"] for r in results if r["archive"] == name)
            workers = serving_shape(model, overrides)[0].workers
            if workers_now.get(name, workers) != workers:  # as the no-op serves: its config's
                set_workers(server, name, workers)
            steps.set_postfix_str(f"ceiling {name} against {noop}")
            ceilings.append(
                ceiling.measure(
                    lambda archive, payloads, c, proto, body, codec: served_load(
                        settings, archive, payloads, c, proto, body=body, codec_model=codec
                    ),
                    model,
                    name,
                    noop,
                    bench_payloads(
                        model, max(args.requests, 4 * args.ceiling_clients), args.model_options
                    ),  # fmt: skip
                    args.ceiling_clients,
                    [
                        (b, p)
                        for b in model_bodies(model, args.bodies)
                        for p in row_protocols(args, b)
                    ],
                    args.ceiling_rounds,
                )
            )
    finally:
        for r in replicas.values():
            r.close()
        server.stop()
        steps.close()

    oip_section = compare_runtimes(args, archives)
    for row in results:
        best = max((s["rps"] for s in row["served"]), default=0.0)
        row["served_over_in_process"] = (
            best / row["in_process"]["rps"] if row["in_process"]["rps"] else None
        )
    report = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {
            "platform": platform.platform(),
            "cpu": describe_cpu(),  # model, class and speed flags: every figure below ran on it
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1m": os.getloadavg()[0],
        },
        "settings": {
            "artifacts": str(args.artifacts),
            "requests": args.requests,
            "concurrency": levels,
            "protocols": args.protocols,
            "bodies": args.bodies,
            "workers": args.worker_counts,
            **args.model_options,
            "min_seconds": args.min_seconds,
            "paced_fraction": args.paced,
            "overrides": overrides,
            "variants": [label for label, _ in variants if label is not None],
        },
        "versions": _versions(),
        "results": results,
    }
    if oip_section is not None:
        report["oip"] = oip_section
    if ceilings:
        report["noop_ceiling"] = ceilings
    report["failures"] = failures(report) + ceiling.failures(ceilings)
    table = markdown_table(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(report, indent=2))
    (args.out / "bench.md").write_text(table)
    plot(report, args.out / "bench.png")
    print(table)
    print(f"wrote {args.out}/bench.json, bench.md and bench.png")
    # Overloaded refusals (the bounded queue at a level above what the server takes at once) are
    # in the report; the exit status says whether the benchmark itself failed.
    if failed := report["failures"]:
        print("benchmark failed:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


def compare_runtimes(args: argparse.Namespace, archives: dict[str, Path]) -> dict | None:
    """TorchServe and the OIP server side by side on this run's fp32 sentiment archive
    (bench/oip.py), or None where this run has none, --oip-seconds is 0 or .venv-oip is missing."""
    from bench import oip

    archive = archives.get(f"sentiment_{RUNTIME_SUFFIX['onnx']}")
    if archive is None or args.oip_seconds <= 0:
        return None
    if not oip.OIP_PYTHON.exists():
        print("bench: no .venv-oip (make install builds it): no OIP comparison", file=sys.stderr)
        return None
    with tqdm(desc="bench oip", total=None, unit="step") as bar:

        def progress(what: str) -> None:
            bar.set_postfix_str(what)
            bar.update()

        return oip.compare(archive, args.oip_seconds, 16, args.oip_rounds, progress=progress)


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {pkg: version(pkg) for pkg in ("torch", "onnxruntime", "torchserve")}


if __name__ == "__main__":
    sys.exit(run_cli(main))
