"""python -m scoring.memory [--model sentiment] [--from SOURCE] [--rows 50000,200000]
[--row-group 10000]: the peak memory (RSS) of `python -m scoring` as the corpus grows, on synthetic
short texts (one Parquet file per size, row groups of --row-group rows). The command runs as a
subprocess; every process of its session is sampled: the driver, each scoring actor (Ray Data's
MapWorker) and Ray's own processes (GCS, raylet, idle workers). Names the CPU; prints a table and
writes reports/scoring-memory.json."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
WORDS = ("fine", "dull", "moving", "thin", "bright", "slow", "warm", "loud", "clever", "flat")


def synthetic(path: Path, rows: int, row_group: int) -> Path:
    """`rows` short reviews ("a fine film with a slow plot, take 17"), written a row group at a
    time (the corpus is never whole in this process either)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, row_group):
            ids = range(start, min(rows, start + row_group))
            texts = [
                f"a {WORDS[i % 10]} film with a {WORDS[(i // 10) % 10]} plot, take {i}" for i in ids
            ]
            writer.write_table(pa.table({"id": list(ids), "text": texts}, schema=schema))
    return path


def sample(session: int) -> dict[str, list[int]]:
    """RSS (bytes) of each live process of `session`, by role."""
    import psutil

    roles: dict[str, list[int]] = {"driver": [], "actors": [], "ray": []}
    for p in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error, ProcessLookupError, OSError):
            if os.getsid(p.pid) != session:
                continue
            cmd = " ".join(p.info["cmdline"] or [])
            role = "driver" if p.pid == session else "actors" if "MapWorker" in cmd else "ray"
            roles[role].append(p.memory_info().rss)
    return roles


def measure(argv: list[str], interval: float = 0.25) -> dict:
    """Run `argv` in a session of its own; the peak RSS of each role over the run (MiB)."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    begin = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    peak = {"driver": 0, "actor": 0, "ray": 0, "total": 0}
    try:
        while proc.poll() is None:
            roles = sample(proc.pid)
            peak["driver"] = max(peak["driver"], *roles["driver"], 0)
            peak["actor"] = max(peak["actor"], *roles["actors"], 0)
            peak["ray"] = max(peak["ray"], sum(roles["ray"]))
            peak["total"] = max(peak["total"], sum(sum(v) for v in roles.values()))
            time.sleep(interval)
        output = proc.stdout.read() if proc.stdout else ""
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)  # what the driver's local Ray left, if anything
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{output[-2000:]}")
    return {f"{k}_mib": round(v / MiB, 1) for k, v in peak.items()} | {
        "wall_s": round(time.perf_counter() - begin, 1),
        "summary": output.strip().splitlines()[-1] if output.strip() else "",
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scoring.memory", description=__doc__)
    p.add_argument("--model", default="sentiment")
    p.add_argument("--from", dest="source", default=None, help="default artifacts/MODEL")
    p.add_argument("--rows", default="50000,200000", help="corpus sizes (comma-separated)")
    p.add_argument("--row-group", type=int, default=10000, help="rows per Parquet row group")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "scoring-memory.json")
    args = p.parse_args(argv)
    if args.model != "sentiment":
        raise SystemExit("python -m scoring.memory: synthetic short texts suit sentiment only")

    from scoring.plugins import cpu_line

    result: dict = {"cpu": cpu_line(), "model": args.model,
                    "row_group": args.row_group, "workers": args.workers, "runs": []}  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="scoring-memory-") as tmp:
        for rows in [int(r) for r in args.rows.split(",")]:
            src = synthetic(Path(tmp) / f"corpus-{rows}.parquet", rows, args.row_group)
            cmd = [sys.executable, "-m", "scoring", args.model, "--input", str(src),
                   "--output", str(Path(tmp) / f"out-{rows}"), "--no-progress",
                   "--workers", str(args.workers)]  # fmt: skip
            if args.source:
                cmd += ["--from", args.source]
            run = {"rows": rows, "input_mib": round(src.stat().st_size / MiB, 1)} | measure(cmd)
            result["runs"].append(run)
            print(
                f"{rows:>9} rows ({run['input_mib']} MiB Parquet): driver {run['driver_mib']} MiB,"
                f" largest actor {run['actor_mib']} MiB, Ray's processes {run['ray_mib']} MiB,"
                f" all {run['total_mib']} MiB peak; {run['wall_s']} s",
                flush=True,
            )
    print(f"on {result['cpu']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"  -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
