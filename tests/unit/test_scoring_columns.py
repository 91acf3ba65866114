"""scoring/: answers → typed columns, the partition plan, and the command's one-line errors on bad
input (all checked before Ray starts or a model loads)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scoring.__main__ import main
from scoring.columns import answer_schema, flatten, to_table
from scoring.inputs import plan, read

ANSWER = {
    "label": "positive",
    "probabilities": {"negative": 0.25, "positive": 0.75},
    "uncertainty": {"entropy": 0.5, "samples": 16},
    "truncated": False,
    "note": None,
}


def test_nested_fields_flatten_with_dots():
    assert flatten(ANSWER)["probabilities.positive"] == 0.75
    assert flatten(ANSWER)["uncertainty.samples"] == 16


def test_answers_and_refusals_become_one_typed_row_each():
    schema = answer_schema(ANSWER, pa.field("id", pa.int64()))
    refused = {"error": "text is empty", "kind": "empty_input", "status": 400}
    odd = ANSWER | {"note": "kept", "new": [1, 2]}
    table = to_table([1, 2, 3], [ANSWER, refused, odd], schema)
    assert table.num_rows == 3
    assert table.schema.field("probabilities.positive").type == pa.float64()
    assert table.schema.field("uncertainty.samples").type == pa.int64()
    assert table.schema.field("truncated").type == pa.bool_()
    rows = table.to_pylist()
    assert rows[0]["label"] == "positive" and rows[0]["error"] is None and rows[0]["extra"] is None
    assert rows[1]["error"] == {"kind": "empty_input", "reason": "text is empty", "status": 400}
    assert rows[1]["label"] is None
    assert json.loads(rows[2]["extra"]) == {"note": "kept", "new": [1, 2]}


def test_a_list_empty_in_the_example_answer_keeps_its_items_in_extra():
    """A tabular answer's `out_of_range` is [] for the example record and names features for
    others: typed from the example, its column held only nulls and the first name failed the job."""
    example = {"label": "benign", "out_of_range": []}
    schema = answer_schema(example, pa.field("id", pa.int64()))
    table = to_table(
        [1, 2], [example, {"label": "malignant", "out_of_range": ["mean area"]}], schema
    )
    rows = table.to_pylist()
    assert "out_of_range" not in schema.names
    assert json.loads(rows[1]["extra"]) == {"out_of_range": ["mean area"]}


def test_a_model_refusing_its_own_example_has_no_schema():
    with pytest.raises(ValueError, match="refused its own example"):
        answer_schema({"error": "x", "kind": "bad", "status": 400}, pa.field("id", pa.int64()))


def test_jsonl_partitions_cover_every_line_once(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": "x" * (i % 7)}) + "\n" for i in range(50)))
    parts = plan([path], "id", partition_bytes=100)
    assert len(parts) > 5
    ids = [i for p in parts for i in read(p, "id", "int")[0]]
    assert ids == list(range(50))


def test_csv_partitions_read_the_header_each_time(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("id,text\n" + "".join(f"{i},review {i}\n" for i in range(20)))
    parts = plan([path], "id", partition_bytes=30)
    assert len(parts) > 2
    rows = [r for p in parts for r in read(p, "id")[1]]
    assert [r["text"] for r in rows] == [f"review {i}" for i in range(20)]


def test_a_bad_jsonl_line_keeps_its_place_as_a_refused_row(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "text": "a"}\nnot json\n[1]\n')
    [part] = plan([path], "id")
    ids, rows = read(part, "id", "int")
    assert len(ids) == 3 and ids[0] == 1
    assert "text" in rows[0] and "text" not in rows[1] and "text" not in rows[2]


@pytest.mark.parametrize(
    "case, want",
    [
        ("missing", "no such file or folder"),
        ("bad_parquet", "unreadable parquet"),
        ("no_id", "no column 'id'"),
        ("suffix", "not a JSONL, CSV or Parquet file"),
    ],
)
def test_bad_input_is_one_line_and_a_nonzero_exit(tmp_path, capsys, case, want):
    path = {
        "missing": tmp_path / "nope.parquet",
        "bad_parquet": tmp_path / "bad.parquet",
        "no_id": tmp_path / "in.parquet",
        "suffix": tmp_path / "in.txt",
    }[case]
    if case == "bad_parquet":
        path.write_bytes(b"PAR1 this is not parquet")
    elif case == "no_id":
        pq.write_table(pa.table({"key": [1], "text": ["a"]}), path)
    elif case == "suffix":
        path.write_text("x")
    out = tmp_path / "out"
    assert main(["sentiment", "--input", str(path), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and want in err and "Traceback" not in err
    assert not (out / "_report.json").exists()


def test_an_unknown_model_is_refused_before_anything_is_read(tmp_path, capsys):
    assert main(["nosuch", "--input", str(tmp_path / "x.jsonl"), "--output", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no registered model 'nosuch'" in err


def test_a_missing_model_source_is_one_line(tmp_path, capsys):
    path = tmp_path / "in.jsonl"
    path.write_text('{"id": 1, "text": "a"}\n')
    args = ["sentiment", "--input", str(path), "--output", str(tmp_path / "o")]
    assert main([*args, "--from", str(tmp_path / "none.mar")]) == 2
    assert "no such archive" in capsys.readouterr().err


def test_an_output_folder_of_another_job_is_refused(tmp_path):
    from scoring.errors import ScoringError
    from scoring.job import prepare_output

    prepare_output(tmp_path / "o", {"model": "sentiment", "inputs": ["a"]})
    prepare_output(tmp_path / "o", {"model": "sentiment", "inputs": ["a"]})  # the same job resumes
    with pytest.raises(ScoringError, match="another job"):
        prepare_output(tmp_path / "o", {"model": "sentiment", "inputs": ["b"]})


def test_an_input_given_twice_is_scored_once_and_said_in_one_line(tmp_path, capsys):
    """The same file by two names, and a copy of its bytes: one input, and one line saying so
    (the job then stops here at the missing model source, before anything is loaded)."""
    (tmp_path / "dir").mkdir()
    a = tmp_path / "a.jsonl"
    a.write_text('{"id": 1, "text": "a"}\n')
    (tmp_path / "b.jsonl").write_bytes(a.read_bytes())
    args = ["sentiment", "--input", str(a), "--input", str(tmp_path / "dir" / ".." / "a.jsonl"),
            "--input", str(tmp_path / "b.jsonl"), "--output", str(tmp_path / "o"),
            "--from", str(tmp_path / "none.mar")]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "no such archive" in err[1]
    assert err[0].startswith("scoring: 2 duplicate input(s) scored once")
    assert "the same file as" in err[0] and "the same bytes as" in err[0]


def test_duplicate_inputs_leave_one_partition_each(tmp_path):
    from scoring.inputs import digests, unique, unique_contents

    a = tmp_path / "a.jsonl"
    a.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(9)))
    c = tmp_path / "c.jsonl"
    c.write_text('{"id": 99}\n')
    (tmp_path / "b.jsonl").write_bytes(a.read_bytes())
    files, same = unique([a, tmp_path / "." / "a.jsonl", tmp_path / "b.jsonl", c])
    assert len(files) == 3 and len(same) == 1
    parts = plan(files, "id", partition_bytes=40)
    by_file, by_part = digests(files, parts)
    kept, parts, by_part, same = unique_contents(files, parts, by_file, by_part)
    assert kept == [a, c] and [p.index for p in parts] == list(range(len(parts)))
    assert [i for p in parts for i in read(p, "id", "int")[0]] == [*range(9), 99]
    assert len(by_part) == len(parts)
