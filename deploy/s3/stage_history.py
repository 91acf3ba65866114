"""Stage pointer documents as data: promote pushes a version, rollback pops back to the one before.

    {"model": "MODEL", "stage": "production", "version": "v3",
     "history": [{"action": "promote", "version": "v1", "from": null, "at": "..."}, ...]}

The history is never rewritten, only appended to; the current version and what a rollback returns
to are both derived from it, so the pointer and its history cannot disagree.
"""

from __future__ import annotations

import datetime as dt

from deploy.s3.errors import NothingToRollBack


def pointer_stack(history: list[dict]) -> list[str]:
    """Versions the stage went through, still "under" the current one (last = current)."""
    stack: list[str] = []
    for move in history:
        if move["action"] == "promote":
            stack.append(move["version"])
        elif move["action"] == "rollback" and stack:
            stack.pop()
    return stack


def _move(doc: dict | None, model: str, stage: str, action: str, version: str, now) -> dict:
    history = list((doc or {}).get("history", []))
    history.append(
        {
            "action": action,
            "version": version,
            "from": (doc or {}).get("version"),
            "at": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        }
    )
    return {"model": model, "stage": stage, "version": version, "history": history}


def promoted(doc: dict | None, model: str, stage: str, version: str, now=None) -> dict:
    """The document after pointing `stage` at `version`; unchanged if it already points there."""
    if doc and doc.get("version") == version:
        return doc
    return _move(doc, model, stage, "promote", version, now)


def rolled_back(doc: dict | None, model: str, stage: str, now=None) -> dict:
    stack = pointer_stack((doc or {}).get("history", []))
    if len(stack) < 2:
        current = stack[-1] if stack else None
        raise NothingToRollBack(
            f"{model} {stage} has no earlier version to roll back to (current: {current})"
        )
    return _move(doc, model, stage, "rollback", stack[-2], now)
