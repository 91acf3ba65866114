"""`make rehearse`: what a Service does to two replicas, with real parts on loopback.

    python -m rehearsal [--users 6] [--pre-stop-s 3] [--out reports] [--no-MODEL-streams]

Two replicas, each TorchServe (docker/entrypoint.sh) + the pod proxy (docker/proxy.sh, HAProxy),
ready when docker/probe.py says so; an HAProxy load balancer in front (rehearsal/balancer.cfg);
Locust (rehearsal/locustfile.py) sending REST and gRPC predictions through it all along. Events:
1. rolling restart: each replica in turn leaves the rotation, sleeps its preStop, gets SIGTERM,
   starts again and rejoins when ready, while the other serves; expected loss: zero;
2. kill: one replica's processes get SIGKILL; expected loss: at most what was in flight on it.
Throughout both, each model with a rehearsal part (tools/<model>/rehearsal.py: `REHEARSAL`, a
tools.plugin.Rehearsal of start(http, token), path, summarise(), problems(), report()) sends its own traffic through the balancer, e.g.
streams that carry their state from chunk to chunk, landing on either replica, judged by its own
expectations (--no-<model>-streams leaves one out). Both replicas mount the same state-signing
key, as the pods mount one Secret. It writes reports/rehearsal.{md,json} and exits 1 when an
expectation fails. Models: the tiny configs the tests use, so it runs in minutes; Locust sends the
first registered model with a `light_request` hook (its samples.py).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from clients.pipes import run_cli
from rehearsal.balancer import Balancer
from rehearsal.pod import ROOT, Pod, pod_config
from rehearsal.queueing import load_steps
from tools.plugin import Rehearsal
from tools.registry import MODELS

TOKEN = "rehearsal-client-token"


def load_model() -> str:
    """The model Locust sends: the first registered one with a `light_request` hook."""
    return next(m.name for m in MODELS if m.samples().light_request)


def rehearsal_hooks() -> dict[str, Rehearsal]:
    """{model: its REHEARSAL} for the models that have one (tools/<model>/rehearsal.py)."""
    return {m.name: hook for m in MODELS if (hook := m.rehearsal()) is not None}


def tiny_archives(work: Path, names: list[str]) -> dict[str, Path]:
    """Each named model's tiny config, trained (registry `train`) and archived."""
    from deploy.archive import build_archive
    from tools.registry import get

    out = {}
    for name in names:
        get(name).train(work / f"{name}-artifacts", "tiny")
        out[name] = build_archive(
            name, work / f"{name}-artifacts", work / "store", build_dir=work / "build"
        )
    return out


def access_log_count(pod: Pod, path: str) -> int:
    """Requests for `path` in a replica's TorchServe access log (all its lives: logs persist)."""
    log = pod.work / "logs" / "access_log.log"
    return sum(f"POST {path} " in line for line in log.read_text().splitlines())


def start_locust(
    lb: Balancer,
    log: Path,
    users: int,
    work: Path,
    pacing_s: float,
    run_time_s: float = 1800,
    model: str | None = None,
    runtime: str = "torchserve",
    http: str | None = None,
) -> subprocess.Popen:
    """Locust users through the balancer, sending `model` (default: `load_model()`) to replicas
    that serve it with `runtime` (torchserve, or oip: the Open Inference Protocol's REST); the
    REST users through `http` where given (a mirror in front of the balancer)."""
    env = os.environ | {
        "REHEARSAL_RUNTIME": runtime,
        "REHEARSAL_MODEL": model or load_model(),
        "REHEARSAL_LOG": str(log),
        "REHEARSAL_TOKEN": TOKEN,
        "REHEARSAL_GRPC": lb.grpc,
        "REHEARSAL_PACING_S": str(pacing_s),
    }
    cmd = [
        str(Path(sys.executable).with_name("locust")),
        "-f",
        str(ROOT / "rehearsal/locustfile.py"),
    ]
    cmd += ["--headless", "--only-summary", "-u", str(users), "-r", str(users)]
    cmd += ["--host", http or lb.http, "--run-time", f"{int(run_time_s)}s", "--stop-timeout", "10"]
    with open(work / "locust.log", "ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)


def rolling_restart(pods: dict[str, Pod], lb: Balancer, pre_stop: float) -> list[dict]:
    events = []
    for name, pod in pods.items():
        start = time.time()
        lb.set_state(name, "maint")  # the endpoints controller drops the terminating pod...
        pod.drain(pre_stop)  # ...while its preStop sleeps; then SIGTERM, and both exit
        pod.start()  # the replacement: startup probe, then the proxy's readiness probe
        lb.set_state(name, "ready")
        lb.wait_state(name, "UP")
        events.append({"event": f"rolling restart of {name}", "start": start, "end": time.time()})
        time.sleep(3)
    return events


def kill(pod: Pod, name: str, lb: Balancer) -> dict:
    in_flight = lb.in_flight(name)
    start = time.time()
    pod.kill()
    lb.wait_state(name, "DOWN")  # health checks notice; until then conn-failures are retried
    end = time.time()
    lb.set_state(name, "maint")  # the dead pod's endpoint is gone; its replacement is a new one
    event = {
        "event": f"kill {name}",
        "start": start,
        "end": end,
        "balancer_in_flight_on_it": in_flight,
    }
    time.sleep(3)
    pod.start()
    lb.set_state(name, "ready")
    lb.wait_state(name, "UP")
    return event


def analyse(log: Path, events: list[dict], grace: float = 2.0) -> dict:
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for event in events:
        # A request is attributed to the event if it was open at any time during it.
        inside = [
            e for e in entries if e["end"] >= event["start"] and e["start"] <= event["end"] + grace
        ]
        lost = [e for e in inside if not e["ok"]]
        if event["event"].startswith("kill"):
            # In flight at the kill: sent before it, answered (or failed) after it.
            event["in_flight_at_kill"] = sum(
                e["start"] <= event["start"] <= e["end"] for e in entries
            )
            event["lost_sent_after_kill"] = sum(e["start"] > event["start"] for e in lost)
        event |= {
            "seconds": round(event["end"] - event["start"], 1),
            "requests": len(inside),
            "lost": len(lost),
            "errors": sorted({" ".join(e["error"].split())[:120] for e in lost}),
        }

    def outside(e: dict) -> bool:
        return not any(e["end"] >= ev["start"] and e["start"] <= ev["end"] + grace for ev in events)

    steady = [e for e in entries if outside(e)]
    latencies = sorted((e["end"] - e["start"]) * 1000 for e in entries if e["ok"])
    replicas: dict[str, int] = {}
    for e in entries:
        if e["ok"] and e["replica"]:
            replicas[e["replica"]] = replicas.get(e["replica"], 0) + 1
    return {
        "requests": len(entries),
        "failed": sum(not e["ok"] for e in entries),
        "by_protocol": {p: sum(e["type"] == p for e in entries) for p in ("POST", "GRPC")},
        "steady": {"requests": len(steady), "lost": sum(not e["ok"] for e in steady)},
        "answered_by": replicas,
        "p50_ms": round(latencies[len(latencies) // 2], 1) if latencies else None,
        "p95_ms": round(latencies[int(len(latencies) * 0.95)], 1) if latencies else None,
        "events": events,
    }


def verdict(result: dict) -> list[str]:
    problems = []
    for event in result["events"]:
        if event["event"].startswith("rolling") and event["lost"]:
            problems.append(f"{event['event']}: {event['lost']} requests lost (expected 0)")
        if event["event"].startswith("kill") and (
            event["lost_sent_after_kill"] or event["lost"] > event["in_flight_at_kill"]
        ):
            problems.append(f"{event['event']}: lost more than what was in flight: {event}")
    if result["steady"]["lost"]:
        problems.append(f"{result['steady']['lost']} requests lost outside any event")
    if len(result["answered_by"]) < 2:
        problems.append(f"not every replica answered: {result['answered_by']}")
    for name, hook in rehearsal_hooks().items():
        if result.get(f"{name}_streams") is not None:
            problems += hook.problems(result[f"{name}_streams"])
    return problems


def report(result: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "rehearsal.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Two-replica rehearsal (`make rehearse`)",
        "",
        f"{result['users']} Locust users (REST:gRPC 2:1, one request per {result['pacing_s']} s "
        f"each) through an HAProxy balancer to two replicas (TorchServe + pod proxy, started by "
        f"the pod's entrypoints, ready by its probes), tiny {result.get('model', load_model())} "
        f"model, preStop {result['pre_stop_s']} s. {result['requests']} requests in {result['seconds']} s "
        f"(REST {result['by_protocol']['POST']}, gRPC {result['by_protocol']['GRPC']}), "
        f"p50 {result['p50_ms']} ms, p95 {result['p95_ms']} ms; answered by replica "
        + ", ".join(f"{k}: {v}" for k, v in sorted(result["answered_by"].items()))
        + ".",
        "",
        "| event | seconds | requests open during it | lost | in flight at the kill (all replicas) | errors |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for e in result["events"]:
        lines.append(
            f"| {e['event']} | {e['seconds']} | {e['requests']} | {e['lost']} | "
            f"{e.get('in_flight_at_kill', '')} | {'; '.join(e['errors'])} |"
        )
    lines += [
        f"| no event | | {result['steady']['requests']} | {result['steady']['lost']} | | |",
        "",
    ]
    if result["queueing"]:
        lines += [
            "Queue time against latency (users sending back to back through the balancer; mean "
            "queue wait from TorchServe's counters, as the KEDA query computes it):",
            "",
            "| users | requests/s | p50 ms | p95 ms | mean queue wait ms | failed |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {q['users']} | {q['rps']} | {q['p50_ms']} | {q['p95_ms']} | "
            f"{q['mean_queue_ms']} | {q['failed']} |"
            for q in result["queueing"]
        ]
        lines.append("")
    for name, hook in rehearsal_hooks().items():
        if result.get(f"{name}_streams") is not None:
            lines += hook.report(result[f"{name}_streams"])
    lines += ["Verdict: " + ("PASS" if not result["problems"] else "FAIL")]
    lines += [f"- {p}" for p in result["problems"]]
    (out / "rehearsal.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--users", type=int, default=6)
    p.add_argument("--pacing-s", type=float, default=0.2, help="seconds between a user's calls")
    p.add_argument("--pre-stop-s", type=float, default=3.0, help="the pod's preStop sleep")
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "rehearse")
    for name in rehearsal_hooks():
        p.add_argument(
            f"--{name}-streams",
            dest=f"{name}_streams",
            action=argparse.BooleanOptionalAction,
            default=True,
            help=f"also serve {name} and send its rehearsal traffic during the events "
            "(default: on)",
        )
    p.add_argument(
        "--queueing-steps",
        type=lambda v: [int(u) for u in v.split(",") if u],
        default=[1, 4, 16, 48],
        help="users per step, back to back, for the queue-time figures ('' to skip)",
    )
    p.add_argument("--step-s", type=float, default=15.0, help="seconds per queueing step")
    args = p.parse_args(argv)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    print("rehearse: training and archiving the tiny models", flush=True)
    hooks = {n: h for n, h in rehearsal_hooks().items() if getattr(args, f"{n}_streams")}
    archives = tiny_archives(args.work, list(dict.fromkeys([load_model(), *hooks])))
    config = pod_config("cpu")
    # One Secret, torchserve-stream-state-key, mounted by every pod.
    key = secrets.token_urlsafe(32)
    pods = {n: Pod(args.work / n, archives, [TOKEN], config, state_key=key) for n in ("a", "b")}
    lb = locust = None
    drivers: dict = {}
    began = time.time()
    try:
        for name, pod in pods.items():
            print(f"rehearse: starting replica {name}", flush=True)
            pod.start()
        lb = Balancer(args.work / "lb", pods, TOKEN).start()
        log = args.work / "requests.jsonl"
        locust = start_locust(lb, log, args.users, args.work, args.pacing_s)
        drivers = {name: hook.start(lb.http, TOKEN) for name, hook in hooks.items()}
        time.sleep(8)
        print("rehearse: rolling restart", flush=True)
        events = rolling_restart(pods, lb, args.pre_stop_s)
        time.sleep(5)
        print("rehearse: killing replica a", flush=True)
        events.append(kill(pods["a"], "a", lb))
        time.sleep(5)
        streams = {}
        for name, driver in drivers.items():
            driver.stop()
            with open(args.work / f"{name}-streams.jsonl", "w") as out:
                out.writelines(json.dumps(a) + "\n" for a in driver.attempts)
            logs = {n: access_log_count(pod, hooks[name].path) for n, pod in pods.items()}
            streams[name] = hooks[name].summarise(driver.attempts, driver.streams, events, logs)
        locust.send_signal(signal.SIGTERM)
        locust.wait(timeout=60)
        result = analyse(log, events)
        steps = []
        if args.queueing_steps:
            print(f"rehearse: queueing steps {args.queueing_steps}", flush=True)
            steps = load_steps(
                pods,
                lambda users, pacing, log, run_s: start_locust(
                    lb, log, users, args.work, pacing, run_s
                ),
                args.work,
                args.queueing_steps,
                args.step_s,
            )
        result |= {
            "users": args.users,
            "pacing_s": args.pacing_s,
            "pre_stop_s": args.pre_stop_s,
            "seconds": round(time.time() - began, 1),
            "model": load_model(),
        }
        for name, summary in streams.items():
            result[f"{name}_streams"] = summary
        result["queueing"] = steps
        result["problems"] = verdict(result)
    finally:
        for driver in drivers.values():
            driver.stop()
        if locust is not None and locust.poll() is None:
            locust.kill()
        if lb is not None:
            lb.stop()
        for pod in pods.values():
            pod.kill()
    report(result, args.out)
    print((args.out / "rehearsal.md").read_text())
    return 1 if result["problems"] else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
