"""scoring/inputs.py on generated files: JSONL and CSV read by their own rules (JSON whitespace, a
line break only where the format has one, CSV quoting and line endings), cut into partitions of
any size, and a row's own fault (bytes that are not UTF-8, nesting too deep, a bare CR outside
quotes, an id of the wrong type) that row's error wherever it is in the file, never the file's."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scoring.__main__ import main
from scoring.inputs import BAD_ROW, plan, read

SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
ids = st.one_of(st.integers(-(2**70), 2**70), st.text(min_size=1, max_size=8))
texts = st.text(max_size=20)
rows = st.lists(st.tuples(ids, texts), min_size=1, max_size=12)


def read_all(path: Path, partition_bytes: int, id_type: str = "string") -> list[tuple]:
    """Every (id, row) of the file, partition by partition."""
    return [
        pair
        for part in plan([path], "id", partition_bytes)
        for pair in zip(*read(part, "id", id_type), strict=True)
    ]


def jsonl_line(rid, text, space: str, end: str) -> bytes:
    """One JSON object with `space` (any JSON whitespace: CR included) between its tokens."""
    body = json.dumps({"id": rid, "text": text}, separators=(f"{space},{space}", f"{space}:"))
    return (space + body + space + end).encode()


@SETTINGS
@given(
    rows=rows,
    space=st.text(alphabet=" \t\r", max_size=3),
    end=st.sampled_from(["\n", "\r\n"]),
    cut=st.integers(1, 400),
)
def test_jsonl_whitespace_is_whitespace_and_every_line_is_one_row(tmp_path, rows, space, end, cut):
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(jsonl_line(r, t, space, end) for r, t in rows))
    got = read_all(path, cut)
    assert [(i, r.get("text")) for i, r in got] == [(str(r), t) for r, t in rows]


@SETTINGS
@given(rows=rows, at=st.integers(0, 12), cut=st.integers(1, 400), late=st.booleans())
def test_a_line_not_utf8_is_one_bad_row_wherever_it_is(tmp_path, rows, at, cut, late):
    """Anywhere in the file (the first line, or past the first 8 KB): one bad_row, in its place."""
    lines = [jsonl_line(r, t, "", "\n") for r, t in rows]
    at = min(at, len(lines))
    pad = [jsonl_line(-1, "x" * 100, "", "\n")] * (90 if late else 0)
    lines = pad + lines
    lines.insert(len(pad) + at, b'{"id": 7, "text": "caf\xe9"}\n')
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(lines))
    got = read_all(path, cut)[len(pad) :]
    assert len(got) == len(rows) + 1
    assert "UTF-8" in got[at][1][BAD_ROW] and got[at][0] is None
    rest = got[:at] + got[at + 1 :]
    assert [(i, r.get("text")) for i, r in rest] == [(str(r), t) for r, t in rows]


@SETTINGS
@given(depth=st.integers(1, 200_000), where=st.sampled_from(["text", "line"]))
def test_deep_nesting_is_a_value_or_that_rows_error(tmp_path, depth, where):
    nested = "[" * depth + "]" * depth
    line = f'{{"id": 1, "text": {nested}}}' if where == "text" else nested
    path = tmp_path / "in.jsonl"
    path.write_text(f'{{"id": 0, "text": "a"}}\n{line}\n{{"id": 2, "text": "b"}}\n')
    got = read_all(path, 1 << 20)
    assert [i for i, _ in got][::2] == ["0", "2"] and len(got) == 3
    assert got[1][0] in ("1", None)
    if where == "line" or BAD_ROW in got[1][1]:
        assert BAD_ROW in got[1][1] and ("nested" in got[1][1][BAD_ROW] or where == "line")


csv_texts = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=20
)


@SETTINGS
@given(
    rows=st.lists(st.tuples(ids, csv_texts), min_size=1, max_size=12),
    quoting=st.sampled_from([csv.QUOTE_MINIMAL, csv.QUOTE_ALL, csv.QUOTE_NONNUMERIC]),
    end=st.sampled_from(["\n", "\r\n"]),
    cut=st.integers(1, 400),
)
def test_csv_quoting_and_line_endings(tmp_path, rows, quoting, end, cut):
    """Quoted commas, quotes, CRs and line breaks are a cell's text, whatever cuts the file."""
    # Python's writer leaves a CR unquoted when its line ending is LF: not RFC 4180 CSV
    assume(quoting != csv.QUOTE_MINIMAL or end == "\r\n" or not any("\r" in t for _, t in rows))
    buf = io.StringIO(newline="")
    w = csv.writer(buf, quoting=quoting, lineterminator=end)
    w.writerow(["id", "text"])
    w.writerows(rows)
    path = tmp_path / "in.csv"
    path.write_bytes(buf.getvalue().encode())
    got = read_all(path, cut)
    assert [(i, r.get("text")) for i, r in got] == [(str(r), t) for r, t in rows]


@SETTINGS
@given(
    rows=st.lists(st.tuples(st.integers(0, 99), st.text("abc ,", max_size=5)), max_size=12),
    at=st.integers(0, 12),
    fault=st.sampled_from([b"caf\xe9", b"a\rb", b"a,b"]),
    cut=st.integers(1, 400),
)
def test_a_bad_csv_record_is_one_bad_row(tmp_path, rows, at, fault, cut):
    """A byte that is not UTF-8, a bare CR in an unquoted cell, one field too many: that row's
    error, in its place, wherever it is in the file."""
    lines = [f'{r},"{t}"\r\n'.encode() for r, t in rows]
    at = min(at, len(lines))
    lines.insert(at, b"7," + fault + b"\r\n")
    path = tmp_path / "in.csv"
    path.write_bytes(b"id,text\r\n" + b"".join(lines))
    got = read_all(path, cut)
    assert len(got) == len(rows) + 1
    assert BAD_ROW in got[at][1], got[at]
    rest = got[:at] + got[at + 1 :]
    assert [(i, r.get("text")) for i, r in rest] == [(str(r), t) for r, t in rows]


@pytest.mark.parametrize(
    "rid, want",
    [(5, 5), ("12", 12), (2**63 - 1, 2**63 - 1), (2**63, None), ("x", None), (1.5, None),
     (True, None), ({"a": 1}, None), ([1], None), (None, None)],
)  # fmt: skip
def test_ids_of_an_int_job(tmp_path, rid, want):
    """--id-type int: an id that is not an int64 (past its range, text, a float) is that row's
    error (a missing id is a null id, scored)."""
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": rid, "text": "a"}) + "\n")
    [(got, row)] = read_all(path, 1 << 20, "int")
    assert got == want
    assert (BAD_ROW in row) == (want is None and rid is not None)


def test_ids_of_a_string_job(tmp_path):
    path = tmp_path / "in.jsonl"
    values = [5, "x", 2**80, 1.5, None, True, {"a": 1}]
    lines = [json.dumps({"id": v, "text": "a"}) for v in values]
    lines.append('{"id": 1' + "0" * 5000 + ', "text": "a"}')  # past Python's int() limit
    path.write_text("".join(line + "\n" for line in lines))
    got = read_all(path, 1 << 20)
    assert [i for i, _ in got][:5] == ["5", "x", str(2**80), "1.5", None]
    assert all(BAD_ROW in r for _, r in got[5:])
    assert all(BAD_ROW not in r for _, r in got[:5])


@pytest.mark.parametrize("column", ["error", "extra"])
def test_an_id_column_named_as_an_output_column_is_refused(tmp_path, capsys, column):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({column: 1, "text": "a"}) + "\n")
    assert main(["sentiment", "--input", str(path), "--output", str(tmp_path / "o"),
                 "--id", column]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--id {column}" in err and "Traceback" not in err
