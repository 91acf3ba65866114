"""The job: partitions → Ray Data `map_batches` over a pool of actors, each loading the model once
and writing each partition it scores as one Parquet part, whole or absent (scoring/outputs.py), so
a re-run of the same command scores only what is missing."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scoring.errors import JobFailed, ScoringError
from scoring.inputs import BAD_ROW, Partition
from scoring.model import ModelRef
from scoring.outputs import Output, open_output

PLAN_FILE = "_plan.json"
REPORT_FILE = "_report.json"


class Scorer:
    """One Ray actor: the model loaded once (`ModelService`), then each partition it is handed
    read, answered in batches of the archive's batchSize (handlers/rows.py) and written."""

    def __init__(
        self, model: dict, id_column: str, output: str, example: dict, id_type: str = "string"
    ):
        from handlers.archive import ArchiveConfig
        from handlers.rows import answer_rows
        from handlers.service import ModelService

        self.model = ModelRef(**model)
        config = ArchiveConfig.read(self.model.config_dir)
        self.service = ModelService.from_dir(self.model.model_dir, config=dict(config.handler))
        self.batch_size = config.batch_size
        self.id_column = id_column
        self.id_type = id_type
        self.output = open_output(output)
        [self.example] = answer_rows(self.service, [example], 1)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list]:
        out: dict[str, list] = {"rows": [], "refused": []}
        for i in range(len(batch["index"])):
            part = Partition(**{k: _item(batch[k][i]) for k in Partition.__dataclass_fields__})
            try:
                rows, refused = self.score(part)
            except Exception as err:  # not a row's: the job's failure, one line (unwrapped by run)
                where = (
                    f"{Path(part.path).name} row group {part.start}"
                    if part.fmt == "parquet"
                    else f"{Path(part.path).name} bytes {part.start}-{part.stop}"
                )
                raise JobFailed(f"{part.name} ({where}): {_describe(err)}") from None
            out["rows"].append(rows)
            out["refused"].append(json.dumps(refused))
        return out

    def score(self, part: Partition) -> tuple[int, dict[str, int]]:
        """Score one partition unless its part is written already: its rows and refusals by kind."""
        import pyarrow as pa

        from handlers.rows import answer_rows
        from scoring.columns import answer_schema, to_table
        from scoring.inputs import read

        if not self.output.exists(part.name):  # else written by an earlier try: never scored twice
            ids, rows = read(part, self.id_column, self.id_type)
            id_type = pa.int64() if self.id_type == "int" else pa.string()  # the job's, set once
            schema = answer_schema(self.example, pa.field(self.id_column, id_type))
            good = [i for i, r in enumerate(rows) if BAD_ROW not in r]  # the rest: refused here
            answers: list[dict] = [
                {"error": r.get(BAD_ROW), "kind": "bad_row", "status": 400} for r in rows
            ]
            answered = answer_rows(
                self.service, [rows[i] for i in good], self.batch_size, [ids[i] for i in good]
            )
            for i, a in zip(good, answered, strict=True):
                answers[i] = a
            if self.output.write_part(part.name, to_table(ids, answers, schema)):
                kinds = Counter(a["kind"] for a in answers if "status" in a and "kind" in a)
                return len(ids), dict(kinds)
        return _done(self.output, part.name)  # or another try wrote it meanwhile


def _describe(err: BaseException) -> str:
    """One line for a failure: its message, with its type's name unless it is one of ours."""
    from handlers.rows import StillRefused

    first = (str(err).strip().splitlines() or [""])[0]
    if isinstance(err, ScoringError | JobFailed | StillRefused):
        return first
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def _cause(err: BaseException) -> str:
    """The one line a failure that came through Ray says: the JobFailed a Scorer raised (Ray
    wraps it, in RayTaskError and Ray Data's UserCodeException), else the engine's failure by
    its kind only (Ray's own text names pids and actor ids)."""
    seen: set[int] = set()
    e: BaseException | None = err
    last = err
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, JobFailed):
            return str(e)
        said = re.search(r"JobFailed: ([^\n]+)", str(e))  # Ray Data keeps it as text only
        if said:
            return said.group(1).strip()
        last = e
        e = getattr(e, "cause", None) or e.__cause__ or e.__context__
    if type(last).__module__.split(".")[0] == "ray":
        return (
            f"the Ray engine failed ({type(last).__name__.removeprefix('Ray')}); "
            "Ray's session logs have the details"
        )
    return _describe(last)


def _item(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


@dataclass
class Report:
    model: str
    version: str
    sha256: str
    source: str
    inputs: list[str]
    output: str
    partitions: int
    rows: int = 0
    scored: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    skipped_partitions: int = 0
    workers: int = 1
    engine_start_s: float = 0.0
    wall_s: float = 0.0
    rows_per_s: float = 0.0
    cpu: str = ""

    def add(self, rows: int, refused: dict[str, int]) -> None:
        self.rows += rows
        for kind, n in refused.items():
            self.refused[kind] = self.refused.get(kind, 0) + n

    def line(self) -> str:
        refused = ", ".join(f"{k} {v}" for k, v in sorted(self.refused.items())) or "none"
        return (
            f"{self.model} {self.version}: {self.rows} rows ({self.scored} scored, refused: "
            f"{refused}) in {self.partitions} partitions ({self.skipped_partitions} already done), "
            f"{self.wall_s:.1f} s, {self.rows_per_s:.1f} rows/s with {self.workers} worker(s) "
            f"on {self.cpu}; engine start {self.engine_start_s:.1f} s"
        )


def prepare_output(output: Path | str | Output, plan_doc: dict) -> str | None:
    """The output folder (or S3 prefix) holds this job's partitions only: a re-run of the same job
    resumes, another job's folder is refused. An input is known by its content (sha256), not its
    path or size: when an input changed since (same model, id column and input paths), the parts
    of its partitions are stale, so they go and are scored afresh (returned: a line saying so)."""
    out = open_output(output)
    out.prepare()
    plan = out.read_json(PLAN_FILE)
    note = None
    if plan is not None and plan != plan_doc:
        stale = _stale_parts(plan, plan_doc)
        if stale is None:
            raise ScoringError(
                f"{out}: holds the output of another job (model, inputs, id column or partitions "
                "differ); choose a new --output"
            )
        for name in sorted(stale & out.names()):
            out.remove(name)
        changed = sorted(_changed_inputs(plan, plan_doc))
        note = (
            f"{len(changed)} input(s) changed since {out} was written ({', '.join(changed[:3])}"
            f"{', ...' if len(changed) > 3 else ''}): {len(stale)} partition(s) scored afresh"
        )
    elif plan is None and out.names():
        raise ScoringError(f"{out}: holds Parquet parts of an unknown job; choose a new --output")
    out.remove(REPORT_FILE)  # only a finished run has a report
    out.write_json(PLAN_FILE, plan_doc)
    return note


def _job_key(plan: dict) -> tuple:
    paths = [i.get("path") if isinstance(i, dict) else i for i in plan.get("inputs", [])]
    return (plan.get("model"), plan.get("sha256"), plan.get("id"), plan.get("id_type"), paths)


def _changed_inputs(old: dict, new: dict) -> set[str]:
    was = {i.get("path"): i.get("sha256") for i in old.get("inputs", []) if isinstance(i, dict)}
    return {i["path"] for i in new.get("inputs", []) if was.get(i["path"]) != i["sha256"]}


def _stale_parts(old: dict, new: dict) -> set[str] | None:
    """The parts of `old` that `new` cannot keep (an input's content changed), or None when `new`
    is another job (another model or id column, other inputs, or the same inputs cut otherwise)."""
    if _job_key(old) != _job_key(new):
        return None
    changed = _changed_inputs(old, new)

    def cut(plan: dict, path: str) -> list[tuple]:
        return [(p.get("fmt"), p.get("start"), p.get("stop"))
                for p in plan.get("partitions", []) if p.get("path") == path]  # fmt: skip

    for path in {i["path"] for i in new["inputs"]} - changed:
        if cut(old, path) != cut(new, path):
            return None  # the same bytes cut otherwise: another --partition-mb
    now = {p["index"]: p for p in new["partitions"]}
    return {
        Partition(p["index"], "", "", 0, 0).name
        for p in old.get("partitions", [])
        if now.get(p.get("index")) != p
    }


def run(
    model: ModelRef,
    parts: list[Partition],
    output: Path | str | Output,
    id_column: str,
    workers: int,
    cpus: int,
    address: str | None = None,
    progress: bool | None = None,
    id_type: str = "string",
    *,
    example: dict,
    cpu: str,
) -> Report:
    """Score `parts` into `output`; `example`: the model's example request (its answer's fields
    are the columns), `cpu`: the machine's line for the report (scoring/plugins.py)."""
    import ray
    from tqdm import tqdm

    output = open_output(output)
    report = Report(
        model.name, model.version, model.sha256, model.source,
        sorted({p.path for p in parts}), str(output), len(parts), workers=workers, cpu=cpu,
    )  # fmt: skip
    begin = time.perf_counter()
    started = start_ray(address, cpus)
    report.engine_start_s = time.perf_counter() - begin
    try:
        import ray.data

        for name in ("ray", "ray.data"):  # our own bar, report and failure line say it
            logging.getLogger(name).setLevel(logging.CRITICAL)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.enable_operator_progress_bars = False
        written = output.names()
        todo = [p for p in parts if p.name not in written]
        report.skipped_partitions = len(parts) - len(todo)
        for p in parts:
            if p.name in written:
                report.add(*_done(output, p.name))
        if todo:
            ds = ray.data.from_items([asdict(p) for p in todo], override_num_blocks=len(todo))
            scored = ds.map_batches(
                Scorer,
                fn_constructor_kwargs={
                    "model": asdict(model),
                    "id_column": id_column,
                    "output": str(output),
                    "example": example,
                    "id_type": id_type,
                },  # fmt: skip
                batch_size=1,
                compute=ray.data.ActorPoolStrategy(size=workers),
                num_cpus=max(1, cpus // workers) if not address else 1,
            )  # Ray Data restarts a lost actor and retries its partition on its own
            with tqdm(
                unit="row", desc=f"scoring {model.name}", dynamic_ncols=True,
                disable=None if progress is None else not progress,  # None: quiet off a terminal
            ) as bar:  # fmt: skip
                try:
                    for row in scored.iter_rows():
                        report.add(int(row["rows"]), json.loads(row["refused"]))
                        bar.update(int(row["rows"]))
                except Exception as err:  # why: one line naming the cause, not Ray's wrappers
                    raise JobFailed(_cause(err)) from None
    finally:
        if started:
            ray.shutdown()
    report.wall_s = time.perf_counter() - begin
    report.scored = report.rows - sum(report.refused.values())
    report.rows_per_s = report.rows / report.wall_s if report.wall_s else 0.0
    written = output.names()
    missing = [p.name for p in parts if p.name not in written]
    if missing:
        raise ScoringError(f"{len(missing)} partitions were not written ({missing[0]}, ...)")
    output.write_json(REPORT_FILE, asdict(report))
    return report


def _done(output: Output, name: str) -> tuple[int, dict[str, int]]:
    errors = output.errors(name)
    return len(errors), dict(Counter(e["kind"] for e in errors if e is not None))


def start_ray(address: str | None, cpus: int) -> bool:
    """Local Ray with `cpus` cores and no dashboard, or the cluster at `address`. Nothing is
    downloaded: no usage stats, no runtime_env packages."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "fatal")  # its C++ warnings: not the user's
    if ray.is_initialized():
        return False
    root = str(Path(__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    if root not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, path) if p)
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    if address:
        ray.init(address=address, **quiet)
    else:
        ray.init(num_cpus=cpus, include_dashboard=False, **quiet)
    return True
