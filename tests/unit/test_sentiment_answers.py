"""sentiment answers as it did before the text kit, to the bit: every answer and refusal of
tests/support/sentiment_answers.py's requests (reviews short and long, batches, JSON and text/plain
bodies, explanations, budget refusals, bad inputs; as served, with one MC sample and padded
batches, and int8) from this checkout's handlers/ equals that of handlers/ at BEFORE, read from git
history, over the same tiny export."""

from __future__ import annotations

import base64
import json
from collections import Counter

from tests.support import sentiment_answers
from tests.unit.test_digits_answers import answers_at

BEFORE = "ea002ff705e4e488ef9e93e50937a62ac9847e9c"
"""main before the text kit: the sentiment code it was checked against."""


def test_sentiment_answers_and_refusals_are_those_before_the_kit(sentiment_artifacts, tmp_path):
    before = answers_at(BEFORE, sentiment_artifacts, tmp_path, sentiment_answers)
    now = sentiment_answers.answers(sentiment_artifacts)
    assert len(now) == len(before)
    for n, (a, b) in enumerate(zip(now, before, strict=True)):
        assert a == b, f"batch {n} differs"
    # The set covers what it says: answers truncated and not, under each serving; explanations
    # of short texts (a pass per word) and long ones (groups); refusals of each kind.
    results = [r for batch in now for r in batch]
    replies = [json.loads(base64.b64decode(r["reply"])) for r in results if "reply" in r]
    rows = [row for reply in replies for row in (reply if isinstance(reply, list) else [reply])]
    predictions = [row for row in rows if "label" in row]
    assert {row["truncated"] for row in predictions} == {True, False}
    assert {row["uncertainty"]["samples"] for row in predictions} == {1, 16}
    explained = [row for row in rows if "words" in row]
    assert {row["method"] for row in explained} == {"hierarchical", "ablation"}
    assert any(row["truncated"] for row in explained)
    # Word groups: more words given a share than passes were spent.
    assert any(
        sum(w["attribution"] != 0 for w in row["words"]) > row["evaluations"] for row in explained
    )
    kinds = Counter((r["status"], r["kind"]) for r in results if "error" in r)
    for status, kind in [
        (400, "bad_field"),
        (400, "bad_encoding"),
        (400, "empty_input"),
        (400, "too_large"),
        (415, "unsupported_media_type"),
        (503, "overloaded"),
    ]:
        assert kinds[(status, kind)] >= 3, (status, kind, kinds)
