"""This model's options for `python -m clients` (the hooks handlers/registry.py describes).

python -m clients predict sentiment --text "A warm, funny film" --protocol grpc
python -m clients predict sentiment --text "Loved it" --text "Hated it"
"""

from __future__ import annotations

import argparse


def arguments(group: argparse._ArgumentGroup) -> None:
    """`predict` options."""
    group.add_argument("--text", action="append", help="a review; repeat for a batch request")


def request(args: argparse.Namespace) -> dict | None:
    """The JSON body `predict` sends, or None when none of this model's options was given."""
    if not args.text:
        return None
    return {"text": args.text[0]} if len(args.text) == 1 else {"texts": args.text}
