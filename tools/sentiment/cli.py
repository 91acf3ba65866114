"""This model's options for `python -m clients` (the hooks tools/registry.py describes).

python -m clients predict sentiment --text "A warm, funny film" --protocol grpc
python -m clients predict sentiment --text "Loved it" --text "Hated it"
python -m clients explain sentiment --text "A warm, funny film" --html why.html
"""

from __future__ import annotations

import argparse

from tools.plugin import Cli


def arguments(group: argparse._ArgumentGroup) -> None:
    """`predict` options."""
    group.add_argument("--text", action="append", help="a review; repeat for a batch request")


def request(args: argparse.Namespace) -> dict | None:
    """The JSON body `predict` sends, or None when none of this model's options was given."""
    if not args.text:
        return None
    return {"text": args.text[0]} if len(args.text) == 1 else {"texts": args.text}


def view(client, args: argparse.Namespace, payload, answer, path):
    """`explain --html`: the text with its words shaded by attribution (one page per request; a
    {"texts": [...]} request gets one section per text)."""
    from pathlib import Path

    from tools.sentiment.explain_view import render_html

    if args.png:
        raise ValueError("sentiment explanations are pages: use --html")
    texts = payload.get("texts") or [payload.get("text")] if isinstance(payload, dict) else []
    answers = answer if isinstance(answer, list) else [answer]
    pages = [render_html(t, a) for t, a in zip(texts, answers, strict=True)]
    Path(path).write_text(pages[0] if len(pages) == 1 else "\n".join(pages), encoding="utf-8")
    return path


CLI = Cli(arguments=arguments, request=request, view=view)
"""This model's `python -m clients` parts (tools/plugin.py)."""
