"""Table rows as requests: the one rule the MLflow PyFunc (training/pyfunc_model.py) and the batch
scoring engine (scoring/) share, so a row scored offline is answered exactly as the same JSON body
POSTed to /predictions/<name>: a row's columns are that body (e.g. `text`, `signal`, `image`), run
through `ModelService.handle_batch` in batches of the archive's `batchSize`, as TorchServe forms
them, limits and work budgets included (`answer_rows`)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

from handlers.errors import KINDS, RequestError, refusal
from handlers.service import ModelService, Request

JSON = {"Content-Type": "application/json"}
RETRY_TRIES = 8
RETRY_DELAY_S, RETRY_MAX_DELAY_S = 0.05, 2.0


class StillRefused(RuntimeError):
    """Rows the service kept refusing as retryable, even alone in a batch: the job fails (one
    line), since writing a retryable refusal as a row's answer would keep it for good."""


def answer_rows(
    service: ModelService, rows: list[dict], batch_size: int, ids: Iterable[Any] | None = None
) -> list[dict]:
    """Each row as a request's JSON body, run in batches of `batch_size` through the service: its
    answer's row (`to_row`), or a refused row's error body with its `status`.

    A refusal the catalogue calls retryable (`overloaded`: the batch's work budget was spent by its
    neighbours) is never the row's answer: such rows run again, in batches cut to the size the
    budget admitted (a batch's first request is always admitted, so a batch of one row within the
    model's limits is answered), with a backoff whenever a round answers none of them. Rows still
    refused so after `RETRY_TRIES` such rounds raise `StillRefused`: a job-level failure."""
    rids = [None if i is None else str(i) for i in ids] if ids is not None else [None] * len(rows)
    answers: list[dict | None] = [None] * len(rows)
    pending, size, delay, stalls = list(range(len(rows))), max(1, batch_size), RETRY_DELAY_S, 0
    while pending:
        retry: list[int] = []
        starts = range(0, len(pending), size)
        for start in starts:
            chunk = pending[start : start + size]
            batch = [
                Request({k: plain(v) for k, v in rows[i].items()}, JSON, rids[i]) for i in chunk
            ]
            for i, result in zip(chunk, service.handle_batch(batch, to_row), strict=True):
                if isinstance(result, RequestError) and KINDS[result.kind].retryable:
                    retry.append(i)
                elif isinstance(result, RequestError):
                    status, _, body = refusal(result)  # as the TorchServe adapter writes it
                    answers[i] = json.loads(body) | {"status": status}
                else:
                    answers[i] = result
        answered = len(pending) - len(retry)
        if retry and not answered:  # nothing admitted even so: smaller batches, and wait
            stalls += 1
            if stalls >= RETRY_TRIES:
                raise StillRefused(
                    f"{len(retry)} row(s) still refused as retryable after {RETRY_TRIES} tries "
                    f"(the first: id {rids[retry[0]]})"
                )
            size = max(1, size // 2)
            time.sleep(delay)
            delay = min(2 * delay, RETRY_MAX_DELAY_S)
        elif retry:  # next round: batches of what the budget admitted per batch
            size = max(1, min(size, answered // len(starts)))
        pending = retry
    return [a for a in answers if a is not None]


def plain(value: Any) -> Any:
    """Table cells arrive as numpy arrays / scalars; the codec validates plain JSON values. Lists
    are walked without recursion: a row's value nested deeper than Python's stack is the codec's
    to refuse (that row's error), never the batch's RecursionError here."""
    out: list = []
    todo = [([value], out)]
    while todo:
        source, target = todo.pop()
        for item in source:
            item = item.tolist() if hasattr(item, "tolist") else item
            if isinstance(item, list):
                target.append([])
                todo.append((item, target[-1]))
            else:
                target.append(item)
    return out[0]


def to_row(answer: Any) -> Any:
    """A typed answer's row (its kit's `to_row`): the served JSON's value, not serialised."""
    return answer.to_row()
