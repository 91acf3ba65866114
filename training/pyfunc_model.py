"""The PyFunc of every registered version (MLflow "models from code": this file is copied into the
logged model and run at load, with the `handlers` package beside it on sys.path).

It is a thin adapter over the serving lifecycle (handlers/service.py): the staged directory is loaded
with the archive's model-config.yaml, the DataFrame's rows are cut into batches of the archive's
`batchSize` as TorchServe forms them, and each batch runs through `ModelService.handle_batch`, limits
and work budget included, so `predict` returns what TorchServe returns:
    each row's columns are the request's JSON body (the fields its `/predictions` JSON body has,
    e.g. `text`) → the served JSON answer, or for a refused row its error body
    (`error`, `kind`) with the HTTP `status` it is served with (handlers/errors.refusal, as the
    TorchServe handler writes it).
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow.pyfunc
import yaml
from mlflow.pyfunc.model import PythonModel


class ServedModel(PythonModel):
    def load_context(self, context):
        from handlers.service import MODEL_CONFIG, ModelService

        model_dir = Path(context.artifacts["model_dir"])
        self.service = ModelService.from_dir(model_dir)
        config_file = model_dir / MODEL_CONFIG
        config = yaml.safe_load(config_file.read_text()) if config_file.is_file() else None
        self.batch_size = max(1, int((config or {}).get("batchSize", 1)))

    def predict(self, context, model_input, params=None):
        rows = model_input.to_dict(orient="records")
        return answer_rows(self.service, rows, self.batch_size)


def answer_rows(service, rows: list[dict], batch_size: int) -> list:
    """Each row as a request's JSON body, run in batches of `batch_size` through the service."""
    from handlers.errors import RequestError, refusal
    from handlers.service import Request

    answers: list = []
    for start in range(0, len(rows), batch_size):
        batch = [
            Request({k: _plain(v) for k, v in row.items()}, {"Content-Type": "application/json"})
            for row in rows[start : start + batch_size]
        ]
        for result in service.handle_batch(batch):
            if isinstance(result, RequestError):
                status, _, body = refusal(result)
                answers.append(json.loads(body) | {"status": status})
            else:
                answers.append(json.loads(result.body))
    return answers


def _plain(value):
    """DataFrame cells arrive as numpy arrays / scalars; the codec validates plain JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


mlflow.models.set_model(ServedModel())
