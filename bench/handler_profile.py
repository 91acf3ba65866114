"""One model's whole handler path in process against its bare graph, per serving-size batch, and
where the handler's time goes: what a served request costs inside the worker, without a server.

    OMP_NUM_THREADS=1 python -m bench.handler_profile --model frequency --body float32
    python -m bench.handler_profile --artifacts /tmp/tiny --body json --profile 0

Requests are the model's bench shape (its samples.py `bench_feed` hook: for frequency 2,000
samples asking for every frequency), batched at the model-config's batch size and threads
(`--threads` overrides them). The handler path is bench/inprocess.handler_path (parse, budget,
model, reply, as a worker runs it); the bare graph is bench/inprocess.InProcess (the runtime call
alone, its inputs made beforehand). Both are timed alternately in rounds (wall and CPU time per
batch), best round of each, so neighbours on shared cores weigh on both alike; then cProfile over
the handler path lists the functions that take the most time (cumulative and own).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from pathlib import Path

from bench.inprocess import InProcess, handler_path, serving_shape
from loadtests.payloads import bench_feed
from training.common.machine import describe_cpu

ROOT = Path(__file__).resolve().parents[1]


def per_batch_ms(run, batches: list, min_seconds: float) -> tuple[float, float]:
    """Mean milliseconds per batch of `run` over `batches`, repeated for at least `min_seconds`:
    (wall, this process's CPU). On shared cores the CPU time moves less with the neighbours."""
    done, start, cpu = 0, time.perf_counter(), time.process_time()
    while True:
        for b in batches:
            run(b)
            done += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return 1e3 * elapsed / done, 1e3 * (time.process_time() - cpu) / done


def measure(
    model: str,
    artifacts: Path,
    runtime: str,
    body: str,
    requests: int,
    rounds: int,
    min_seconds: float,
    overrides: dict,
) -> dict:
    payloads = bench_feed(model, requests)
    shape, _ = serving_shape(model, overrides)
    run, batches, refused = handler_path(model, artifacts, runtime, payloads, body, overrides)
    bare = InProcess(model, artifacts, runtime, payloads, overrides)
    feeds = [feed for feed, _ in bare.feeds]
    for b in batches:  # warm-up (the bare model warmed up when built)
        run(b)
    handler, bare_graph = [], []
    for _ in range(rounds):
        handler.append(per_batch_ms(run, batches, min_seconds))
        bare_graph.append(per_batch_ms(bare.run, feeds, min_seconds))
    handler_ms, handler_cpu = [h[0] for h in handler], [h[1] for h in handler]
    bare_ms, bare_cpu = [b[0] for b in bare_graph], [b[1] for b in bare_graph]
    best_h, best_b = min(handler_ms), min(bare_ms)
    return {
        "model": model,
        "runtime": runtime,
        "body": body,
        "batch_size": shape.batch_size,
        "threads": shape.threads,
        "handler_ms_per_batch": [round(x, 3) for x in handler_ms],
        "bare_ms_per_batch": [round(x, 3) for x in bare_ms],
        "handler_cpu_ms_per_batch": [round(x, 3) for x in handler_cpu],
        "bare_cpu_ms_per_batch": [round(x, 3) for x in bare_cpu],
        "handler_rps": round(1e3 * shape.batch_size / best_h, 1),
        "bare_rps": round(1e3 * shape.batch_size / best_b, 1),
        "bare_share_of_handler": round(best_b / best_h, 3),
        "refused_over_budget": refused[0],
        "cpu": describe_cpu(),
    }


def profile(run, batches: list, seconds: float, top: int) -> str:
    """cProfile over the handler path for `seconds`: the `top` functions by cumulative, then by
    own time."""
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    while time.perf_counter() - start < seconds:
        for b in batches:
            run(b)
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    return out.getvalue()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="frequency")
    p.add_argument("--artifacts", type=Path, default=ROOT / "artifacts", help="holds <model>/")
    p.add_argument("--runtime", default="onnx")
    p.add_argument("--body", choices=("json", "float32"), default="float32")
    p.add_argument("--requests", type=int, default=64, help="distinct requests, batched")
    p.add_argument("--rounds", type=int, default=3, help="alternating handler/bare rounds")
    p.add_argument("--min-seconds", type=float, default=3.0, help="per round and side")
    p.add_argument("--threads", type=int, default=None, help="runtime threads (model-config's)")
    p.add_argument("--profile", type=int, default=25, help="functions listed; 0: no profile")
    p.add_argument("--profile-seconds", type=float, default=5.0)
    args = p.parse_args(argv)
    overrides = {"handler.threads": args.threads} if args.threads is not None else {}
    art = args.artifacts / args.model
    result = measure(args.model, art, args.runtime, args.body, args.requests, args.rounds,
                     args.min_seconds, overrides)  # fmt: skip
    print(json.dumps(result, indent=1))
    if args.profile > 0:
        run, batches, _ = handler_path(
            args.model, art, args.runtime, bench_feed(args.model, args.requests), args.body,
            overrides,
        )  # fmt: skip
        print(profile(run, batches, args.profile_seconds, args.profile))


if __name__ == "__main__":
    main()
