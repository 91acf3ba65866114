"""Every code block in README.md and docs/*.md is run by the doc tests or says why not
(tests/support/docblocks.py has the rules; tests/integration/test_docs_run.py runs them)."""

from __future__ import annotations

import json

import pytest

from tests.support.docblocks import DOCS, PENDING, ROOT, blocks, rel, still_pending


@pytest.mark.parametrize("doc", [d for d in DOCS if rel(d) not in PENDING], ids=rel)
def test_every_code_block_is_run_or_says_why_not(doc):
    found = blocks(doc)
    problems = [p for b in found if (p := b.problem())]
    assert not problems, "\n".join(problems)
    for block in found:
        if block.language == "json":
            try:
                json.loads(block.source)
            except ValueError as e:
                pytest.fail(f"{block.where}: json block does not parse: {e}")


def test_pending_docs_are_still_pending():
    """Fails once a pending doc is labelled, so that PENDING shrinks instead of hiding a page
    (a loop, not a parametrization: an empty PENDING must not show up as a skipped test)."""
    labelled = [doc for doc in sorted(PENDING) if not still_pending(ROOT / doc)]
    assert not labelled, f"labelled now: remove from PENDING: {labelled}"


def test_unlabelled_and_mislabelled_blocks_are_reported(tmp_path):
    doc = tmp_path / "x.md"
    doc.write_text(
        "```\nmake serve\n```\n\n"
        "```bash no-test: needs a GPU\nnvidia-smi\n```\n\n"
        "```bash maybe later\nmake k8s\n```\n\n"
        "```json\n{}\n```\n\n"
        "- a list item:\n\n  ```python\n  print(1)\n  ```\n"
    )
    found = blocks(doc)
    assert [b.language for b in found] == ["", "bash", "bash", "json", "python"]
    assert [b.line for b in found] == [1, 5, 9, 13, 19]
    assert "needs a language" in found[0].problem()
    assert found[1].problem() is None and not found[1].runs
    assert found[1].not_run_because == "needs a GPU"
    assert "only 'no-test: <why>'" in found[2].problem()
    assert found[3].problem() is None and not found[3].runs
    assert found[4].runs and found[4].source == "print(1)\n"
