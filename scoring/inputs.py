"""The corpus: which files, cut into which partitions, and how one partition is read.

Inputs are JSONL (`.jsonl`, `.json`, `.ndjson`), CSV (`.csv`) or Parquet (`.parquet`, `.pq`) files,
a folder of them, or the same on S3 (`s3://bucket/key` or `s3://bucket/prefix/`: `fetch_s3`).

A partition is a Parquet row group, or a byte range of whole lines (JSONL) or records (CSV) of a
file: the plan depends on the files only, so a re-run cuts the same partitions and skips those
already written.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from handlers.errors import echo
from scoring.errors import ScoringError

FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
           ".parquet": "parquet", ".pq": "parquet"}  # fmt: skip
PARTITION_BYTES = 32 << 20


@dataclass(frozen=True)
class Partition:
    index: int
    path: str
    fmt: str
    start: int
    """Parquet: the row group; JSONL/CSV: the first byte."""
    stop: int
    """Parquet: start + 1; JSONL/CSV: the byte after the last."""

    @property
    def name(self) -> str:
        return f"part-{self.index:05d}.parquet"


def input_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise ScoringError(f"{path}: not a JSONL, CSV or Parquet file (by its suffix)")
    return fmt


def local_files(source: str) -> list[Path]:
    path = Path(source)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS)
        if not files:
            raise ScoringError(f"{source}: no JSONL, CSV or Parquet file in this folder")
        return files
    if not path.is_file():
        raise ScoringError(f"{source}: no such file or folder")
    input_format(path)
    return [path]


def fetch_s3(uri: str, dest: Path) -> list[Path]:
    """s3://bucket/key (or a prefix) → local copies under `dest`, each verified against the sha256
    its metadata names (the project's publish convention), written to a temp name then renamed."""
    import os

    from deploy.s3 import IntegrityError, StoreSettings
    from deploy.s3.objects import store_errors
    from handlers.manifest import sha256_file

    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket or not key:
        raise ScoringError(f"{uri}: want s3://bucket/key or s3://bucket/prefix/")
    settings = StoreSettings()
    client = settings.client()
    files: list[Path] = []
    with store_errors(bucket):
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=key)
        keys = sorted(
            o["Key"]
            for page in pages
            for o in page.get("Contents", [])
            if (o["Key"] == key or key.endswith("/")) and Path(o["Key"]).suffix.lower() in FORMATS
        )
        if not keys:
            raise ScoringError(f"{uri}: no such object (nor JSONL, CSV or Parquet under it)")
        for k in keys:
            local = dest / bucket / k
            local.parent.mkdir(parents=True, exist_ok=True)
            tmp = local.with_name(f".{local.name}.download")
            client.download_file(bucket, k, str(tmp), Config=settings.transfer())
            want = client.head_object(Bucket=bucket, Key=k).get("Metadata", {}).get("sha256")
            if want and sha256_file(tmp) != want:
                tmp.unlink()
                raise IntegrityError(
                    f"s3://{bucket}/{k} does not match the sha256 its metadata names"
                )
            os.replace(tmp, local)
            files.append(local)
    return files


def plan(
    files: list[Path], id_column: str, partition_bytes: int = PARTITION_BYTES
) -> list[Partition]:
    """Every file's partitions, numbered in order; checks each file's id column on the way."""
    parts: list[Partition] = []
    for path in files:
        fmt = input_format(path)
        columns = _columns(path, fmt)
        if columns is not None and id_column not in columns:
            raise ScoringError(
                f"{path}: no column {id_column!r} (it has {', '.join(columns) or 'none'}); "
                "name the id column with --id"
            )
        for start, stop in _ranges(path, fmt, partition_bytes):
            parts.append(Partition(len(parts), str(path), fmt, start, stop))
    return parts


def _columns(path: Path, fmt: str) -> list[str] | None:
    """The file's column names (JSONL: its first readable object's keys within its first MiB; None
    when there is none: its rows are then each refused, or scored, on their own)."""
    try:
        if fmt == "parquet":
            return list(pq.ParquetFile(path).schema_arrow.names)
        if fmt == "csv":
            return _header(path)[0]
        with open(path, "rb") as f:
            head = f.read(1 << 20)
    except (pa.ArrowException, OSError, ValueError) as err:
        raise ScoringError(f"{path}: unreadable {fmt}: {_line(err)}") from None
    for line in _lines(head if len(head) < (1 << 20) else head[: head.rfind(b"\n") + 1]):
        row = _json_row(line)
        if row is not None and BAD_ROW not in row:
            return list(row)
    return None


def _ranges(path: Path, fmt: str, partition_bytes: int) -> list[tuple[int, int]]:
    """Each partition's byte range: cut after a line (JSONL) or a record (CSV: a line break
    outside quotes, so a quoted cell's line breaks stay in it) once `partition_bytes` are in."""
    if fmt == "parquet":
        return [(g, g + 1) for g in range(pq.ParquetFile(path).num_row_groups)]
    size = path.stat().st_size
    out = []
    with open(path, "rb") as f:
        start = _header(path)[1] if fmt == "csv" else 0  # the header is read with every partition
        f.seek(start)
        if fmt == "jsonl":
            while start < size:
                f.seek(min(size, start + partition_bytes))
                f.readline()  # to the end of the line the cut falls in
                stop = min(size, f.tell()) if start + partition_bytes < size else size
                out.append((start, stop))
                start = stop
            return out
        pos, quoted = start, False
        for line in f:
            pos += len(line)
            quoted ^= line.count(b'"') % 2 == 1
            if not quoted and pos - start >= partition_bytes:
                out.append((start, pos))
                start = pos
        if start < size:
            out.append((start, size))
    return out


def _header(path: Path) -> tuple[list[str], int]:
    """A CSV file's header (its first record) and its length in bytes."""
    with open(path, "rb") as f:
        data, quoted = b"", False
        for line in f:
            data += line
            quoted ^= line.count(b'"') % 2 == 1
            if not quoted:
                break
    try:
        header = next(csv.reader([data.decode("utf-8-sig")]), [])
    except (UnicodeDecodeError, csv.Error) as err:
        raise ScoringError(f"{path}: unreadable csv header: {_line(err)}") from None
    return header, len(data)


def digests(files: list[Path], parts: list[Partition]) -> tuple[dict[str, str], list[str]]:
    """The sha256 of each file and of each partition's own bytes (a CSV partition's with its
    header; a Parquet row group's: its file's), streamed in one read of each file: a job is keyed
    by content, so an edit that keeps a file's size is seen, and only its partitions go stale."""
    import hashlib

    by_file: dict[str, str] = {}
    by_part: dict[int, str] = {}
    for path in files:
        whole = hashlib.sha256()
        mine = [p for p in parts if p.path == str(path)]
        ranged = [p for p in mine if p.fmt != "parquet"]
        with open(path, "rb") as f:
            header = f.read(ranged[0].start) if ranged else b""  # a CSV file's; JSONL: none
            whole.update(header)
            for part in ranged:
                h = hashlib.sha256(header)
                left = part.stop - part.start
                while left > 0 and (block := f.read(min(left, 1 << 20))):
                    whole.update(block)
                    h.update(block)
                    left -= len(block)
                by_part[part.index] = h.hexdigest()
            while block := f.read(1 << 20):
                whole.update(block)
        by_file[str(path)] = whole.hexdigest()
        for part in mine:
            by_part.setdefault(part.index, by_file[str(path)])
    return by_file, [by_part[p.index] for p in parts]


def unique(
    files: list[Path], key: Callable[[Path], Hashable] = Path.resolve
) -> tuple[list[Path], list[tuple[Path, Path]]]:
    """The files, each the first with its key (by default its real path: `a` and `dir/../a`, or a
    link to `a`, are one file), and the (dropped, kept) pairs."""
    seen: dict[Hashable, Path] = {}
    kept, dropped = [], []
    for f in files:
        k = key(f)
        if k in seen:
            dropped.append((f, seen[k]))
        else:
            seen[k] = f
            kept.append(f)
    return kept, dropped


def unique_contents(
    files: list[Path], parts: list[Partition], by_file: dict[str, str], part_digests: list[str]
) -> tuple[list[Path], list[Partition], list[str], list[tuple[Path, Path]]]:
    """The files whose bytes an earlier file does not already hold, their partitions renumbered,
    and the (dropped, kept) pairs."""
    kept, dropped = unique(files, lambda f: by_file[str(f)])
    if not dropped:
        return files, parts, part_digests, []
    keep = {str(f) for f in kept}
    pairs = [(p, d) for p, d in zip(parts, part_digests, strict=True) if p.path in keep]
    renumbered = [replace(p, index=i) for i, (p, _) in enumerate(pairs)]
    return kept, renumbered, [d for _, d in pairs], dropped


def id_type(files: list[Path], id_column: str) -> str:
    """The job's id type, decided once: "int" when every input is Parquet with an integer id
    column, else "string" (JSONL and CSV have no schema: `--id-type int` asks for integers)."""
    for path in files:
        if input_format(path) != "parquet":
            return "string"
        if not pa.types.is_integer(pq.ParquetFile(path).schema_arrow.field(id_column).type):
            return "string"
    return "int" if files else "string"


_INT = re.compile(r"[+-]?[0-9]{1,20}")


def as_id(value: Any, kind: str) -> tuple[Any, str | None]:
    """A row's id as the job's id type, or (None, why not)."""
    if value is None:
        return None, None
    if kind == "int":
        if isinstance(value, str) and _INT.fullmatch(value.strip()):
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
            return value, None
        return None, (
            f"the id {echo(value)} is not an integer in int64's range "
            "(--id-type string keeps any id)"
        )
    if isinstance(value, str):
        return value, None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"the id {echo(value)} is not a string or a number"
    return str(value), None  # json.loads refuses any int str() would (the same digit limit)


def read(part: Partition, id_column: str, kind: str = "string") -> tuple[list[Any], list[dict]]:
    """One partition's ids (as the job's id type, `kind`) and rows (each row's other columns: the
    request's JSON body). A row that cannot be read, or whose id is not of that type, keeps its
    place as a row that is refused (`bad_row`, with the reason), with a null id."""
    if part.fmt == "parquet":
        rows = pq.ParquetFile(part.path).read_row_group(part.start).to_pylist()
    else:
        with open(part.path, "rb") as f:
            f.seek(part.start)
            data = f.read(part.stop - part.start)
        if part.fmt == "csv":
            header = _header(Path(part.path))[0]
            rows = [_csv_row(r, header) for r in _records(data)]
        else:
            rows = [r for line in _lines(data, bom=part.start == 0) if (r := _json_row(line))]
    ids = []
    for i, row in enumerate(rows):
        rid, why = as_id(row.pop(id_column, None), kind)
        if why is not None and BAD_ROW not in row:
            rows[i] = {BAD_ROW: why}
        ids.append(rid)
    return ids, rows


def _lines(data: bytes, bom: bool = False) -> list[bytes]:
    """JSON Lines: a line ends at LF only (a CR is JSON whitespace, inside an object or before the
    LF); a UTF-8 byte-order mark at the file's start is not part of the first line."""
    if bom and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    return data.split(b"\n")


def _json_row(line: bytes) -> dict | None:
    """One JSONL line → its object, a BAD_ROW row, or None for a blank line."""
    if not line.strip(b" \t\r\n"):  # JSON's whitespace
        return None
    try:
        row = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as err:
        return {BAD_ROW: f"not UTF-8 (byte {err.start} of the line)"}
    except RecursionError:
        return {BAD_ROW: "not read: nested too deep"}
    except ValueError as err:
        return {BAD_ROW: f"not JSON: {_line(err)}"}
    if not isinstance(row, dict):
        return {BAD_ROW: "not a JSON object"}
    return row


def _records(data: bytes) -> list[bytes]:
    """CSV records (RFC 4180): a record ends at a line break outside quotes (LF or CRLF); blank
    lines are none. A quote left open at the end is one last record (refused by `_csv_row`)."""
    out, record, quoted = [], b"", False
    for line in data.split(b"\n"):
        record = line if not record else record + b"\n" + line
        quoted ^= line.count(b'"') % 2 == 1
        if not quoted:
            if record.strip(b"\r"):
                out.append(record)
            record = b""
    if record.strip(b"\r\n"):
        out.append(record)
    return out


def _csv_row(record: bytes, header: list[str]) -> dict:
    try:
        text = record.decode("utf-8")
    except UnicodeDecodeError as err:
        return {BAD_ROW: f"not UTF-8 (byte {err.start} of the record)"}
    if text.count('"') % 2:
        return {BAD_ROW: "a quoted cell is never closed"}
    try:
        [cells] = list(csv.reader([text + "\n"]))
    except csv.Error as err:
        why = "a line break (CR) in an unquoted cell" if "new-line" in str(err) else _line(err)
        return {BAD_ROW: f"not CSV: {why}; quote the cell"}
    except ValueError:
        return {BAD_ROW: "not CSV"}
    if len(cells) != len(header):
        return {BAD_ROW: f"{len(cells)} cells where the header has {len(header)}"}
    return dict(zip(header, cells, strict=True))


BAD_ROW = "\x00bad_row"
"""The key a row that could not be read carries instead of its columns (refused, never scored)."""


def _line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
