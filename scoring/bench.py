"""python -m scoring.bench [--model sentiment] [--rows N]: rows/s of `python -m scoring` (1 and 2
Ray workers) against the bare ModelService loop over the same rows in this process (the runtime
`auto` picks, all cores' threads), the engine's start-up cost, naming the CPU; prints a table and
writes reports/scoring-bench.json."""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scoring.bench", description=__doc__)
    p.add_argument("--model", default="sentiment")
    p.add_argument("--from", dest="source", default=None, help="default artifacts/MODEL")
    p.add_argument("--rows", type=int, default=2000)
    p.add_argument("--workers", default="1,2", help="worker counts to time (default 1,2)")
    p.add_argument("--out", type=Path, default=ROOT / "reports" / "scoring-bench.json")
    args = p.parse_args(argv)

    import pyarrow as pa
    import pyarrow.parquet as pq

    from handlers.archive import ArchiveConfig
    from handlers.rows import answer_rows
    from handlers.service import ModelService
    from scoring import inputs, job, plugins
    from scoring.model import resolve

    cpus = os.cpu_count() or 1
    bodies = plugins.bench_bodies(args.model, args.rows)
    with tempfile.TemporaryDirectory(prefix="scoring-bench-") as tmp:
        work = Path(tmp)
        model = resolve(args.model, args.source, work, plugins.download)
        src = work / "corpus.parquet"
        table = pa.Table.from_pylist([{"id": i} | b for i, b in enumerate(bodies)])
        pq.write_table(table, src, row_group_size=max(1, args.rows // (4 * cpus)))

        config = ArchiveConfig.read(model.config_dir)
        service = ModelService.from_dir(model.model_dir, config=dict(config.handler))
        size = config.batch_size
        answer_rows(service, bodies[: size * 2], size)  # warm-up
        begin = time.perf_counter()
        answer_rows(service, bodies, size)
        bare_s = time.perf_counter() - begin
        del service
        result: dict = {
            "cpu": plugins.cpu_line(),
            "model": args.model,
            "version": model.version,
            "rows": args.rows,
            "batch_size": size,
            "bare_rows_per_s": args.rows / bare_s,
            "runs": [],
        }
        parts = inputs.plan([src], "id")
        for workers in [int(w) for w in args.workers.split(",")]:
            out = work / f"out-{workers}"
            job.prepare_output(out, {"bench": workers})
            report = job.run(
                model, parts, out, "id", workers, cpus, progress=False,
                example=plugins.example(model.name), cpu=result["cpu"],
            )  # fmt: skip
            scoring_s = report.wall_s - report.engine_start_s
            result["runs"].append({
                "workers": workers,
                "engine_start_s": report.engine_start_s,
                "wall_s": report.wall_s,
                "rows_per_s": args.rows / scoring_s,
                "rows_per_s_with_start": args.rows / report.wall_s,
                "ratio_to_bare": (args.rows / scoring_s) / result["bare_rows_per_s"],
            })  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"{args.model} {model.version}, {args.rows} rows, batch {size}, on {result['cpu']}")
    print(f"  bare ModelService loop: {result['bare_rows_per_s']:8.1f} rows/s")
    for r in result["runs"]:
        print(
            f"  scoring, {r['workers']} worker(s): {r['rows_per_s']:8.1f} rows/s "
            f"({r['ratio_to_bare']:.2f} of bare; engine start {r['engine_start_s']:.1f} s, "
            f"{r['rows_per_s_with_start']:.1f} rows/s counting it)"
        )
    print(f"  -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
