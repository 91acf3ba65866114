"""The fenced code blocks of README.md and docs/*.md, read with Sybil's Markdown lexer, and what
each one is: run by the doc tests, or explicitly not.

Every block's info string starts with a language:
- RUN (`bash`, `sh`, `python`): commands a reader types. The doc tests run them, in order, in one
  shell per document (tests/integration/test_docs_run.py), unless the info string goes on with
  `no-test: <why>`, e.g. ```` ```bash no-test: needs a Kubernetes cluster ````;
- SHOWN (`json`, `text`, ...): output, data or a synopsis, never run (`json` must parse).
A block with no language, or another one, fails tests/unit/test_docs_blocks.py: nothing is left
out without saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sybil import Document, Region
from sybil.parsers.markdown.lexers import RawFencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"bash", "sh", "python"}
SHOWN = {"json", "text", "yaml", "properties", "promql"}
NOT_RUN = re.compile(r"^no-test:\s*(?P<why>\S.*)$")

PENDING: dict[str, str] = {}
"""Docs whose blocks are neither labelled nor run yet, each with the reason: listed here, never
left out silently, and a test fails once a pending doc is labelled so that the entry goes."""

_LEXER = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<info>[^\n]*)$\n", re.MULTILINE))


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    language: str
    """The info string's first word ("" when there is none)."""
    rest: str
    """What follows the language in the info string."""
    source: str

    @property
    def where(self) -> str:
        doc = self.doc.relative_to(ROOT) if self.doc.is_relative_to(ROOT) else self.doc
        return f"{doc}:{self.line}"

    @property
    def not_run_because(self) -> str | None:
        match = NOT_RUN.match(self.rest)
        return match["why"] if match else None

    @property
    def runs(self) -> bool:
        return self.language in RUN and self.not_run_because is None

    def problem(self) -> str | None:
        """Why this block is neither run nor explicitly marked; None when it is fine."""
        if self.language in SHOWN:
            return None
        if self.language not in RUN:
            return (
                f"{self.where}: a code block needs a language: one of {sorted(RUN)} (run by the "
                f"doc tests) or {sorted(SHOWN)} (shown only), not {self.language or 'none'!r}"
            )
        if self.rest and self.not_run_because is None:
            return f"{self.where}: after {self.language!r} only 'no-test: <why>', not {self.rest!r}"
        return None


def parse(doc: Path) -> Document:
    """The document with one Sybil region per fenced block; region.parsed is its Block."""

    def blocks(document: Document):
        for region in _LEXER(document):
            info = region.lexemes["info"].strip()
            language, _, rest = info.partition(" ")
            line = document.text.count("\n", 0, region.start) + 1
            region.parsed = Block(doc, line, language, rest.strip(), str(region.lexemes["source"]))
            yield region

    return Document.parse(str(doc), blocks)


def rel(doc: Path) -> str:
    return str(doc.relative_to(ROOT))


def still_pending(doc: Path) -> bool:
    """A pending doc stays pending while a block lacks a label or none says why it is not run."""
    found = blocks(doc)
    return any(b.problem() for b in found) or not any(b.not_run_because for b in found)


def blocks(doc: Path) -> list[Block]:
    return [region.parsed for _, region in parse(doc).regions]


def regions(doc: Path) -> list[Region]:
    return [region for _, region in parse(doc).regions]
