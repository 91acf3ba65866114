"""This model's options for `python -m clients` (the hooks tools/registry.py describes).

python -m clients predict tabular --record '{"mean radius": 17.99, ...}'   # one record: an object back
python -m clients predict tabular --record a.json --record b.json          # {"records": [...]}: a list back
python -m clients predict tabular --csv patients.csv                       # the CSV itself (text/csv): a list back
python -m clients explain tabular --record a.json                          # each feature's attribution
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from clients.client import decode_answer
from tools.plugin import Cli


def arguments(group: argparse._ArgumentGroup) -> None:
    """`predict` options."""
    group.add_argument(
        "--record", action="append", metavar="JSON",
        help="tabular: a record as a JSON object, inline or a file; repeat for a batch request",
    )  # fmt: skip
    group.add_argument(
        "--csv", type=Path, metavar="FILE",
        help="tabular: a CSV file (a header row, one row per record) sent as the body",
    )  # fmt: skip


def _record(value: str) -> dict:
    text = value if value.lstrip().startswith("{") else Path(value).read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--record is not JSON: {e}") from None


def request(args: argparse.Namespace) -> dict | None:
    """One --record as the object itself, several as {"records": [...]}; for --csv a stand-in
    (`predict` sends the file); None without either."""
    if args.csv is not None:
        return {"csv": str(args.csv)}
    if not args.record:
        return None
    records = [_record(r) for r in args.record]
    return records[0] if len(records) == 1 else {"records": records}


def predict(client, args: argparse.Namespace, payload) -> dict | list | None:
    """The answer of a --csv call (the file as a text/csv body; over gRPC as text), else None."""
    if args.csv is None:
        return None
    data = args.csv.read_bytes()
    if client.protocol == "rest":
        response = client.post(args.model, data, {"Content-Type": "text/csv"}, version=args.version)
        return decode_answer(response.content)
    return client.predict(args.model, data, version=args.version)


def view(client, args: argparse.Namespace, payload, answer, path):
    """`explain --png`: the (first) record's attributions as bars."""
    from tools.tabular.explain_view import render_png

    if args.html:
        raise ValueError("tabular explanations are bar charts: use --png")
    return render_png(answer[0] if isinstance(answer, list) else answer, path)


CLI = Cli(arguments=arguments, request=request, predict=predict, view=view)
"""This model's `python -m clients` parts (tools/plugin.py)."""
