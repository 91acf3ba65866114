"""Sentiment served by TorchServe and over the Open Inference Protocol (oip/), side by side in one
run: 16 concurrent REST clients' throughput and a lone client's p50, each server alone on the
machine in turn (TorchServe, OIP, TorchServe, OIP), from the same archive.

    python -m bench.oip [--archive model_store/sentiment.mar] [--seconds 20] [--clients 16]

Prints one JSON object with the CPU (training.common.machine) and each runtime's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
OIP_PYTHON = ROOT / ".venv-oip" / "bin" / "python"


def _drive(post, bodies: list, clients: int, seconds: float) -> dict:
    """`clients` threads posting bodies in turn for `seconds`: answered/s and latency p50."""
    stop = time.monotonic() + seconds
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def client(i: int) -> None:
        session = requests.Session()
        n = i
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            ok = post(session, bodies[n % len(bodies)])
            dt = time.perf_counter() - t0
            with lock:
                if ok:
                    latencies.append(dt)
                else:
                    errors[0] += 1
            n += clients

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    begin = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - begin
    return {
        "clients": clients,
        "answered_per_s": round(len(latencies) / wall, 2),
        "p50_ms": round(statistics.median(latencies) * 1000, 1) if latencies else None,
        "errors": errors[0],
    }


def _torchserve(archive: Path, work: Path):
    from tests.support.torchserve import start_torchserve

    # TorchServe registers an archive under its manifest's modelName (`python -m bench` names
    # its archives <model>_<runtime>), whatever the file is called.
    with zipfile.ZipFile(archive) as mar:
        name = json.loads(mar.read("MAR-INF/MANIFEST.json"))["model"]["modelName"]
    server = start_torchserve(work, {name: archive})
    url = f"{server.inference_url}/predictions/{name}"
    auth = server.auth()

    def post(session, text):
        r = session.post(url, json={"text": text}, headers=auth, timeout=60)
        return r.status_code == 200

    return server.stop, post


def _oip(archive: Path, work: Path):
    from rehearsal.pod import free_port

    http, grpc = free_port(), free_port()
    token = work / "token"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(work)}
    log = (work / "oip.log").open("wb")
    process = subprocess.Popen(
        [
            str(OIP_PYTHON),
            "-m",
            "oip",
            "--http-port",
            str(http),
            "--grpc-port",
            str(grpc),
            "--token-file",
            str(token),
            "--work-dir",
            str(work / "models"),
            f"sentiment={archive}",
        ],  # fmt: skip
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    from oip.wait_ready import main as wait_ready

    if wait_ready([f"http://127.0.0.1:{http}", "sentiment", "--timeout", "300"]):
        process.kill()
        raise SystemExit((work / "oip.log").read_text()[-3000:])
    url = f"http://127.0.0.1:{http}/v2/models/sentiment/infer"
    auth = {"Authorization": f"Bearer {token.read_text().strip()}"}

    def post(session, text):
        body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [text]}]}
        r = session.post(url, json=body, headers=auth, timeout=60)
        return r.status_code == 200

    def stop():
        process.terminate()
        process.wait(30)
        log.close()

    return stop, post


def _interleaved_lone(posts: dict, bodies: list, n: int) -> dict:
    """Both servers up, one client alternating between them request by request: the lone-client
    p50 of each under the same load from everything else on the machine."""
    sessions = {k: requests.Session() for k in posts}
    latencies: dict[str, list[float]] = {k: [] for k in posts}
    for i in range(n):
        for name, post in posts.items():
            t0 = time.perf_counter()
            assert post(sessions[name], bodies[i % len(bodies)]), name
            latencies[name].append(time.perf_counter() - t0)
    return {k: round(statistics.median(v[5:]) * 1000, 1) for k, v in latencies.items()}


def compare(
    archive: Path,
    seconds: float = 20.0,
    clients: int = 16,
    rounds: int = 2,
    lone_requests: int = 60,
    progress=None,
) -> dict:
    """Sentiment from `archive` served by each runtime: both up at once with one client alternating
    between them request by request (the lone-client p50 of each under the same neighbours), then
    each alone on the machine in turn for `rounds` rounds (`clients` closed-loop clients for
    `seconds`, then one client). → the `oip` section of the bench report, its CPU named."""
    from tools.sentiment.samples import bench_feed
    from training.common.machine import cpu_summary, describe_cpu

    def step(what: str) -> None:
        if progress is not None:
            progress(what)

    bodies = [b["text"] for b in bench_feed(200, seed=1)]
    archive = archive.resolve()
    with tempfile.TemporaryDirectory(prefix="bench-lone-") as tmp:
        stops, posts = {}, {}
        try:
            for name, start in (("torchserve", _torchserve), ("oip", _oip)):
                (Path(tmp) / name).mkdir()
                step(f"oip: starting {name}")
                stops[name], posts[name] = start(archive, Path(tmp) / name)
            step("oip: interleaved lone client")
            interleaved = _interleaved_lone(posts, bodies, lone_requests)
        finally:
            for stop in stops.values():
                stop()
    results: dict[str, list] = {"torchserve": [], "oip": []}
    for i in range(rounds):
        for name, start in (("torchserve", _torchserve), ("oip", _oip)):
            with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
                step(f"oip: round {i + 1}/{rounds}, {name} alone")
                stop, post = start(archive, Path(tmp))
                try:
                    _drive(post, bodies, clients, min(3.0, seconds))  # warm-up
                    many = _drive(post, bodies, clients, seconds)
                    alone = _drive(post, bodies, 1, seconds / 2)
                finally:
                    stop()
            results[name].append({"concurrent": many, "lone": alone})
    out: dict = {
        "cpu": describe_cpu(),
        "cpu_summary": cpu_summary(describe_cpu()),
        "load_average_1m": os.getloadavg()[0],
        "clients": clients,
        "seconds": seconds,
        "interleaved_lone_p50_ms": interleaved,
        "lone_extra_ms": round(interleaved["oip"] - interleaved["torchserve"], 1),
        "runs": results,
    }
    if rounds:
        best = {k: max(r["concurrent"]["answered_per_s"] for r in v) for k, v in results.items()}
        out["best_answered_per_s"] = best
        out["oip_over_torchserve_throughput"] = (
            round(best["oip"] / best["torchserve"], 3) if best["torchserve"] else None
        )
    return out


def markdown(section: dict) -> list[str]:
    """The bench report's side-by-side table of the two runtimes."""
    lone = section["interleaved_lone_p50_ms"]
    lines = [
        "## TorchServe and the Open Inference Protocol server, side by side",
        "",
        f"Sentiment, the same archive, on {section['cpu_summary']} (load average "
        f"{section['load_average_1m']:.1f} at the end): {section['clients']} closed-loop REST "
        f"clients for {section['seconds']:g} s, each runtime alone on the machine in turn, best "
        "round; the lone client with both up, one client alternating between them request by "
        "request (docs/oip.md).",
        "",
        "| | TorchServe | OIP | OIP / TorchServe |",
        "|---|---:|---:|---:|",
    ]
    best = section.get("best_answered_per_s")
    if best:
        ratio = section.get("oip_over_torchserve_throughput")
        lines.append(
            f"| {section['clients']} clients (answered/s) | {best['torchserve']:.2f} | "
            f"{best['oip']:.2f} | {ratio if ratio is not None else '-'} |"
        )
    lines.append(
        f"| lone client p50, interleaved (ms) | {lone['torchserve']:.1f} | {lone['oip']:.1f} | "
        f"{section['lone_extra_ms']:+.1f} ms |"
    )
    return [*lines, ""]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.oip")
    p.add_argument("--archive", type=Path, default=ROOT / "model_store" / "sentiment.mar")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--lone-requests", type=int, default=60)
    p.add_argument("--lone-only", action="store_true", help="only the interleaved lone client")
    args = p.parse_args(argv)
    section = compare(
        args.archive,
        args.seconds,
        args.clients,
        0 if args.lone_only else args.rounds,
        args.lone_requests,
        progress=lambda what: print(what, file=sys.stderr),
    )
    print(json.dumps(section, indent=1))
    print("\n".join(markdown(section)), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
