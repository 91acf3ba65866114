"""Table rows as requests: the one rule the MLflow PyFunc (training/pyfunc_model.py) and the batch
scoring engine (scoring/) share, so a row scored offline is answered exactly as the same JSON body
POSTed to /predictions/<name>.

A row's columns are the request's JSON body (e.g. `text`, `signal`, `image`); rows are cut into
batches of the archive's `batchSize`, as TorchServe forms them, and each batch runs through
`ModelService.handle_batch`, limits and work budgets included. A refused row answers its error body
(`error`, `kind`) with the HTTP `status` it is served with.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from handlers.errors import RequestError, refusal
from handlers.service import MODEL_CONFIG, ModelService, Request

JSON = {"Content-Type": "application/json"}


def row_request(row: Mapping[str, Any], id: str | None = None) -> Request:
    """One table row → the Request its JSON body makes (the only place rows become Requests)."""
    return Request({k: plain(v) for k, v in row.items()}, JSON, id)


def batch_size(model_dir: str | Path) -> int:
    """The archive's `batchSize` (model-config.yaml), 1 when it has none."""
    config_file = Path(model_dir) / MODEL_CONFIG
    config = yaml.safe_load(config_file.read_text()) if config_file.is_file() else None
    return max(1, int((config or {}).get("batchSize", 1)))


def answer_rows(
    service: ModelService, rows: list[dict], batch_size: int, ids: Iterable[Any] | None = None
) -> list[dict]:
    """Each row as a request's JSON body, run in batches of `batch_size` through the service: the
    served JSON answer, or a refused row's error body with its `status`."""
    rids = [None if i is None else str(i) for i in ids] if ids is not None else [None] * len(rows)
    answers: list[dict] = []
    for start in range(0, len(rows), batch_size):
        stop = start + batch_size
        batch = [row_request(r, i) for r, i in zip(rows[start:stop], rids[start:stop], strict=True)]
        for result in service.handle_batch(batch):
            if isinstance(result, RequestError):
                status, _, body = refusal(result)  # as the TorchServe adapter writes it
                answers.append(json.loads(body) | {"status": status})
            else:
                answers.append(json.loads(result.body))
    return answers


def plain(value: Any) -> Any:
    """Table cells arrive as numpy arrays / scalars; the codec validates plain JSON values."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value
