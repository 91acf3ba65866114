"""The PyFunc of every registered version (MLflow "models from code": this file is copied into the
logged model and run at load, with the `handlers` package beside it on sys.path).

It is a thin adapter over the serving lifecycle (handlers/service.py): the staged directory is loaded
with the archive's model-config.yaml, the DataFrame's rows are cut into batches of the archive's
`batchSize` as TorchServe forms them (handlers/rows.py, shared with the batch scoring engine), and
each batch runs through `ModelService.handle_batch`, limits and work budget included, so `predict`
returns what TorchServe returns, but for a retryable refusal (503 overloaded: the batch's budget spent
by its neighbours), which a batch job never keeps as an answer: such rows run again in smaller
batches (`answer_rows`), and get the answer the server gives them there:
    each row's columns are the request's JSON body (the fields its `/predictions` JSON body has,
    e.g. `text`) → the served JSON answer, or for a refused row its error body
    (`error`, `kind`) with the HTTP `status` it is served with.

The model config `answers` (logged as "dicts") chooses the form: "dicts" answers each row with its
JSON answer as a dict; "json" with that answer's JSON text, which `mlflow.pyfunc.spark_udf(...,
result_type="string", model_config={"answers": "json"})` carries whole, refusals included
(docs/scoring.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow.pyfunc
from mlflow.pyfunc.model import PythonModel

ANSWERS = ("dicts", "json")
"""The values of the `answers` model config: each row's answer as a dict, or as its JSON text."""


class ServedModel(PythonModel):
    def load_context(self, context):
        from handlers.archive import ArchiveConfig
        from handlers.service import ModelService

        model_dir = Path(context.artifacts["model_dir"])
        self.service = ModelService.from_dir(model_dir)
        self.batch_size = ArchiveConfig.read(model_dir).batch_size
        self.answers = (context.model_config or {}).get("answers", "dicts")
        if self.answers not in ANSWERS:
            raise ValueError(f"model config answers={self.answers!r}: want one of {ANSWERS}")

    def predict(self, context, model_input, params=None):
        from handlers.rows import answer_rows

        rows = model_input.to_dict(orient="records")
        answers = answer_rows(self.service, rows, self.batch_size)
        return [json.dumps(a) for a in answers] if self.answers == "json" else answers


mlflow.models.set_model(ServedModel())
