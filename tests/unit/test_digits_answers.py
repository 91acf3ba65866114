"""digits answers as it did before the image kit, to the bit: every answer and refusal of
tests/support/digits_answers.py's requests (the held-out 297 digits, uploads of every served
format, mode and polarity, grids, explanations, budget refusals, bad inputs) from this checkout's
handlers/ equals that of handlers/ at BEFORE, read from git history, over the same tiny export and
runtime; but for what the reading deliberately changed since: an image larger than 8 x 8 is read
for its strokes (polarity from the paper's level, frames, boxes and lines left out: reading.py), so
a request holding one is compared in its status, refusals, row count, keys and polarity read only,
and every answer carries `digits_found` (null for an 8 x 8 grid), which BEFORE did not."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path
from types import ModuleType

from tests.support import digits_answers

ROOT = Path(__file__).resolve().parents[2]
BEFORE = "709d0d27bac3dfde5deeacfcb3dc0c111eff2e85"
"""main before the settings base and the image kit: the digits code they were checked against."""


def answers_at(
    commit: str, artifacts: Path, tmp: Path, support: ModuleType = digits_answers
) -> list[list[dict]]:
    """The answers of handlers/ as of `commit`, in a process that imports only that code; `support`:
    the request set whose script records them (tests/support/<model>_answers.py)."""
    archive = subprocess.run(
        ["git", "archive", commit, "handlers"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    code = tmp / "code"
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(code, filter="data")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(code)}
    out = tmp / "answers.json"
    script = Path(str(support.__file__))
    subprocess.run(
        [sys.executable, str(script), str(artifacts), str(out)], env=env, cwd=tmp, check=True
    )
    return json.loads(out.read_text())


def _native_only(body: object) -> bool:
    """Whether a request body holds 8 x 8 grids only (read as before, to the bit)."""
    if not isinstance(body, dict):
        return False
    images = [body["image"]] if "image" in body else body.get("images")
    if not isinstance(images, list):
        return False
    return all(
        isinstance(g, list) and len(g) == 8 and all(isinstance(r, list) and len(r) == 8 for r in g)
        for g in images
    )


def _rows(result: dict) -> list[dict]:
    reply = json.loads(base64.b64decode(result["reply"]))
    return reply if isinstance(reply, list) else [reply]


def _without_found(result: dict) -> dict:
    """The result with each answer's `digits_found` (null for a grid) taken out, re-encoded as
    BEFORE's serialisation wrote it."""
    if "reply" not in result:
        return result
    reply = json.loads(base64.b64decode(result["reply"]))
    if not isinstance(reply, (dict, list)) or not all(
        isinstance(r, dict) and "label" in r
        for r in (reply if isinstance(reply, list) else [reply])
    ):
        return result
    for row in reply if isinstance(reply, list) else [reply]:
        assert row.pop("digits_found") is None, row  # a grid is taken as one framed digit
    return result | {"reply": base64.b64encode(json.dumps(reply).encode()).decode()}


def test_digits_answers_and_refusals_are_those_before_the_kit(digits_artifacts, tmp_path):
    before = answers_at(BEFORE, digits_artifacts, tmp_path)
    now = digits_answers.answers(digits_artifacts)
    sent = digits_answers.requests(digits_answers.held_out())
    assert len(now) == len(before) == len(sent)
    for n, (a, b, batch) in enumerate(zip(now, before, sent, strict=True)):
        assert len(a) == len(b) == len(batch), f"batch {n} differs"
        for got, was, (body, _, _) in zip(a, b, batch, strict=True):
            if _native_only(body) or "reply" not in was:
                assert _without_found(got) == was, f"batch {n} differs"
                continue
            assert "reply" in got and got.keys() == was.keys(), f"batch {n} differs"
            rows, old = _rows(got), _rows(was)
            assert len(rows) == len(old), f"batch {n} differs"
            for row, prior in zip(rows, old, strict=True):
                assert row.keys() - {"digits_found"} == prior.keys(), (n, row.keys())
                assert row.get("polarity") == prior.get("polarity"), (n, row, prior)
    # The set covers what it says: every held-out digit answered, both polarities read, and
    # refusals of each kind the codec and the budgets give.
    results = [r for batch in now for r in batch]
    replies = [json.loads(base64.b64decode(r["reply"])) for r in results if "reply" in r]
    rows = [row for reply in replies for row in (reply if isinstance(reply, list) else [reply])]
    assert sum("label" in row for row in rows) >= 297 + 30
    assert {row["polarity"] for row in rows if "polarity" in row} == {
        "bright_on_dark",
        "dark_on_light",
    }
    assert sum("attributions" in row for row in rows) >= 4
    kinds = Counter((r["status"], r["kind"]) for r in results if "error" in r)
    for kind in ("bad_field", "bad_encoding", "too_large", "unsupported_media_type", "empty_input"):
        assert any(k == kind for _, k in kinds), (kind, kinds)
    assert kinds[(503, "overloaded")] >= 2, kinds  # the image budget and the decoding guard
