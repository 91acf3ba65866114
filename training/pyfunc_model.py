"""The PyFunc of every registered version (MLflow "models from code": this file is copied into the
logged model and run at load, with the `handlers` package beside it on sys.path).

It is a thin adapter: the answers come from the handler's own predictor, loaded from the staged
directory with the archive's model-config.yaml, so `predict` returns what TorchServe returns.
    sentiment: a DataFrame with a `text` column → one response dict per row
    frequency: `signal`, `sample_rate`, `frequencies` columns → one response dict per row
"""

from __future__ import annotations

import json
from pathlib import Path

import mlflow.pyfunc
import yaml
from mlflow.pyfunc.model import PythonModel


class ServedModel(PythonModel):
    def load_context(self, context):
        model_dir = Path(context.artifacts["model_dir"])
        manifest = json.loads((model_dir / "manifest.json").read_text())
        config = yaml.safe_load((model_dir / "model-config.yaml").read_text()) or {}
        serving = config.get("handler") or {}
        self.family = manifest["model"]
        if self.family == "sentiment":
            from handlers.sentiment.predict import SentimentPredictor

            self.predictor = SentimentPredictor.from_dir(model_dir, serving)
        else:
            # Until handlers/frequency gets a predictor class, the engine plus the handler's
            # body layout (handlers/frequency_handler.py postprocess) is the served path.
            from handlers.frequency.engine import FrequencyEngine
            from handlers.frequency.settings import parse_settings

            self.settings = parse_settings(manifest, serving)
            self.engine = FrequencyEngine(self.settings, model_dir)
            self.model = {"name": "frequency", "version": self.settings.version}

    def predict(self, context, model_input, params=None):
        if self.family == "sentiment":
            return self.predictor.predict([str(t) for t in model_input["text"]])
        from handlers.frequency.codec import decode_request, json_floats

        rows = model_input.to_dict(orient="records")
        requests = [
            decode_request({"body": {k: _plain(v) for k, v in row.items()}}, {}, self.settings)
            for row in rows
        ]
        answers = []
        for req, comp in zip(requests, self.engine.windows(requests), strict=True):
            components = [
                {
                    "frequency": f,
                    "signal": json_floats(comp.signal[j]),
                    "std": json_floats(comp.std[j]),
                }  # fmt: skip
                for j, f in enumerate(req.frequencies)
            ]
            answers.append(
                {
                    "sample_rate": self.settings.sample_rate,
                    "components": components,
                    "model": dict(self.model),
                }  # fmt: skip
            )
        return answers


def _plain(value):
    """DataFrame cells arrive as numpy arrays / scalars; the codec validates plain JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return value


mlflow.models.set_model(ServedModel())
