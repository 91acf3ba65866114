"""python -m scoring MODEL --input FILE|DIR|s3://... --output DIR|s3://... [--from SOURCE]
[--id COLUMN] [--workers N] [--cpus N] [--address RAY] : score a corpus offline (docs/scoring.md)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from scoring.errors import JobFailed, ScoringError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m scoring", description=__doc__)
    p.add_argument("model", help="a registered model name (python -m handlers.registry names)")
    p.add_argument(
        "--input",
        required=True,
        action="append",
        help="a JSONL, CSV or Parquet file, a folder of them, or s3://bucket/key|prefix/; repeatable",
    )
    p.add_argument(
        "--output",
        required=True,
        help="folder or s3://bucket/prefix/ of Parquet parts (resumable)",
    )
    p.add_argument(
        "--from",
        dest="source",
        default=None,
        help="artifact folder, .mar or models:/NAME/VERSION|ALIAS (default artifacts/MODEL)",
    )
    p.add_argument(
        "--id", dest="id_column", default="id", help="the input's id column (default id)"
    )
    p.add_argument(
        "--id-type",
        choices=("string", "int"),
        default=None,
        help="the id column's type in the output (default: the input's schema: int for Parquet "
        "with integer ids, else string); an id that is not one is that row's error",
    )
    p.add_argument(
        "--workers", type=int, default=1, help="Ray actors, each with the model (default: 1)"
    )
    p.add_argument(
        "--cpus",
        type=int,
        default=os.cpu_count() or 1,
        help="cores for local Ray (default: all of this machine's)",
    )
    p.add_argument("--address", default=None, help="a Ray cluster's address (default: local Ray)")
    p.add_argument(
        "--partition-mb",
        type=float,
        default=32,
        help="JSONL/CSV partition size in MiB (Parquet: one partition per row group)",
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar (default: only on a terminal)",
    )
    args = p.parse_args(argv)
    try:
        return _run(args)
    except ScoringError as err:
        print(f"scoring: {err}", file=sys.stderr)
        return 2
    except JobFailed as err:
        print(f"scoring: failed: {err}", file=sys.stderr)
        return 1
    except Exception as err:  # why: the command ends in one line, whatever failed under it
        from deploy.s3 import StoreError

        kind = "" if isinstance(err, StoreError) else f"{type(err).__name__}: "
        first = (str(err).strip().splitlines() or [""])[0]
        print(f"scoring: failed: {kind}{first}", file=sys.stderr)
        return 1


def _run(args) -> int:
    from scoring import inputs, job, plugins
    from scoring.columns import ERROR, EXTRA
    from scoring.model import known, resolve
    from scoring.outputs import open_output

    if args.workers < 1 or args.cpus < 1:
        raise ScoringError("--workers and --cpus must be at least 1")
    if args.id_column in (ERROR, EXTRA):
        raise ScoringError(
            f"--id {args.id_column}: the output has an {args.id_column!r} column of its own; "
            "rename the input's id column"
        )
    output = open_output(args.output)
    output.check()
    known(args.model)
    with tempfile.TemporaryDirectory(prefix="scoring-") as work:
        files: list[Path] = []
        labels: dict[str, str] = {}  # local path → what the plan names (an S3 copy: its URI)
        for source in args.input:  # the input is checked before any model is loaded
            if source.startswith("s3://"):
                fetched = inputs.fetch_s3(source, Path(work) / "inputs")
                for f in fetched:
                    labels[str(f)] = "s3://" + f.relative_to(Path(work) / "inputs").as_posix()
                files += fetched
            else:
                files += inputs.local_files(source)
        files, same_file = inputs.unique(files)
        parts = inputs.plan(files, args.id_column, max(1, int(args.partition_mb * (1 << 20))))
        digests, part_digests = inputs.digests(files, parts)  # what the job is keyed by
        files, parts, part_digests, same_bytes = inputs.unique_contents(
            files, parts, digests, part_digests
        )
        if same_file or same_bytes:
            said = [f"{_label(a, labels)} (the same {what} as {_label(b, labels)})"
                    for what, pairs in (("file", same_file), ("bytes", same_bytes))
                    for a, b in pairs]  # fmt: skip
            print(f"scoring: {len(said)} duplicate input(s) scored once: {', '.join(said)}",
                  file=sys.stderr)  # fmt: skip
        if not parts:
            raise ScoringError("the input has no rows")
        model = resolve(args.model, args.source, Path(work), plugins.download)
        id_type = args.id_type or inputs.id_type(files, args.id_column)
        plan_doc = {
            "model": model.name,
            "sha256": model.sha256,
            "id": args.id_column,
            "id_type": id_type,
            "inputs": [
                {"path": _label(f, labels), "size": f.stat().st_size, "sha256": digests[str(f)]}
                for f in files
            ],
            "partitions": [
                asdict(p) | {"path": _label(Path(p.path), labels), "sha256": digest}
                for p, digest in zip(parts, part_digests, strict=True)
            ],
        }
        note = job.prepare_output(output, plan_doc)
        if note:
            print(f"scoring: {note}", file=sys.stderr)
        report = job.run(model, parts, output, args.id_column, args.workers, args.cpus,
                         args.address, args.progress, id_type,
                         example=plugins.example(model.name), cpu=plugins.cpu_line())  # fmt: skip
    print(report.line())
    with contextlib.suppress(BrokenPipeError):
        sys.stdout.flush()
    return 0


def _label(path: Path, labels: dict[str, str]) -> str:
    return labels.get(str(path), str(path.resolve()))


if __name__ == "__main__":
    sys.exit(main())
