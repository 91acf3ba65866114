"""frequency answers as it did before the signal kit, to the bit: every answer and refusal of
tests/support/frequency_answers.py's requests (one-shot signals of several lengths, streams over
several chunks carrying the returned state, explanations, budget refusals, every bad-input kind,
JSON and float32 bodies and answers) from this checkout's handlers/ equals that of handlers/ at
BEFORE, read from git history, over the same tiny export and runtime, states signed with the same
key.

Left out of the comparison, deliberately changed since: the judgement's added figures
(`nonstationarity`, `offset`: the body keys and the X-Nonstationarity / X-Offset headers), and a
stream answer's state token (it carries the judged sums now) and its `residual` /
`out_of_distribution` (a stream is judged on everything it has seen, not on its chunk alone):
`without_judgement`. The components, the bands, the one-shot judgement and every refusal are
compared as they were.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections import Counter
from pathlib import Path

from tests.support import frequency_answers
from tests.unit.test_digits_answers import answers_at

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "ea002ff705e4e488ef9e93e50937a62ac9847e9c"
"""main before the signal kit: the frequency code it was checked against."""


def without_band_scale(artifacts: Path, tmp: Path) -> Path:
    """A copy of the export without the calibrated band's factors, which BEFORE predates (its
    manifest check refuses the key; the factors have their own test, test_frequency_band.py):
    this checkout serves such an export with the raw band, as BEFORE did."""
    copy = tmp / "export"
    shutil.copytree(artifacts, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["handler"].pop("band_scale", None)
    for key in ("nonstationarity_threshold", "offset_threshold"):  # BEFORE refuses them too
        manifest["handler"].pop(key, None)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


ADDED_KEYS = ("nonstationarity", "offset")
ADDED_HEADERS = ("X-Nonstationarity", "X-Offset")
STREAM_KEYS = ("state", "residual", "out_of_distribution")
STREAM_HEADERS = ("X-Stream-State", "X-Residual", "X-Out-Of-Distribution")


def without_judgement(record: dict) -> dict:
    """A recorded answer less what was deliberately changed since BEFORE (the module's
    docstring); a JSON body parsed (its floats exact), refusals as they are."""
    if "reply" not in record:
        return record
    headers = dict(record["headers"])
    streaming = "X-Stream-State" in headers
    for name in ADDED_HEADERS + (STREAM_HEADERS if streaming else ()):
        headers.pop(name, None)
    out = record | {"headers": headers}
    if record["content_type"] == "application/json":
        body = json.loads(base64.b64decode(record["reply"]))
        for key in ADDED_KEYS + (STREAM_KEYS if "state" in body else ()):
            body.pop(key, None)
        out["reply"] = body
    return out


def test_frequency_answers_and_refusals_are_those_before_the_kit(frequency_artifacts, tmp_path):
    export = without_band_scale(frequency_artifacts, tmp_path)
    before = answers_at(BEFORE, export, tmp_path, frequency_answers)
    now = frequency_answers.answers(export)
    assert len(now) == len(before)
    for n, (a, b) in enumerate(zip(now, before, strict=True)):
        assert [without_judgement(r) for r in a] == [without_judgement(r) for r in b], (
            f"batch {n} differs"
        )
    # The set covers what it says: answers in both forms, streams carried over every chunk,
    # explanations, and refusals of each kind the codec, the states and the budgets give.
    results = [r for batch in now for r in batch]
    replies = [r for r in results if "reply" in r]
    kinds = Counter(r["content_type"] for r in replies)
    assert kinds["application/json"] >= 40 and kinds["application/octet-stream"] >= 15, kinds
    chunks = [r for r in replies if "X-Stream-State" in r["headers"]]
    assert len(chunks) >= 4 * 7, len(chunks)  # 4 streams, opened and continued 6 times
    assert max(int(r["headers"]["X-Samples-Seen"]) for r in chunks) >= 300 + 370
    bodies = [
        json.loads(base64.b64decode(r["reply"]))
        for r in replies
        if r["content_type"] == "application/json"
    ]
    assert sum("attributions" in b for b in bodies) >= 4
    errors = Counter((r["status"], r["kind"]) for r in results if "error" in r)
    for kind in (
        (400, "bad_field"),
        (400, "bad_encoding"),
        (400, "too_large"),
        (400, "empty_input"),
        (400, "bad_state"),
        (409, "stale_state"),
        (415, "unsupported_media_type"),
    ):
        assert errors[kind] >= 1, (kind, errors)
    assert errors[(503, "overloaded")] >= 3, errors  # the sample budget and the explanation one
