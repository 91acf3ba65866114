"""The tabular kit's part of the lifecycle (handlers/service.py), which a tabular classifier takes
whole: records read and checked by the schema (records.py), admitted within the batch's budgets
(its cost model: records per batch; explanations at records x forward passes, priced before any
runs), classified in one runtime call per batch with calibrated probabilities, MC-dropout spread
from the head (masks drawn once at load: an answer does not depend on its batch), the features
outside training's ranges and the distance from its records (distance.py); explained per feature
(explain.py).

Nothing here names a model: a model of the kit is a subclass naming itself and its settings
parser (handlers/tabular/model.py).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from handlers.budget import Budget
from handlers.codec import Reply
from handlers.errors import ArchiveError, RequestError
from handlers.explain import Explanations
from handlers.kits.tabular.distance import Distance
from handlers.kits.tabular.explain import Attributor, FeatureExplanation, log_odds
from handlers.kits.tabular.records import (
    Answers,
    Records,
    answered,
    explanation_budget,
    read_records,
    records_budget,
    rows_of,
)
from handlers.kits.tabular.settings import TabularSettings
from handlers.manifest import read_manifest
from handlers.runtime import Runtime, core_slots, load_runtime
from handlers.service import Request
from handlers.telemetry import Telemetry
from handlers.uncertainty import SCORES, MLPHead, classify_with_uncertainty


class TabularModel:
    reads_parts: ClassVar[bool] = False
    model: ClassVar[str]
    """The default model name (TorchServe's registered name wins)."""
    parse_settings: ClassVar[staticmethod[[dict, dict | None], TabularSettings]]
    """The model's `parse_settings(manifest, config)`."""

    def __init__(self, settings: TabularSettings, runtime: Runtime, head: MLPHead,
                 distance: Distance, name: str):  # fmt: skip
        self.settings, self.runtime, self.head, self.name = settings, runtime, head, name
        self.export, self.schema, self.distance = settings.export, settings.export.schema, distance
        self.masks = head.masks(settings.mc_samples, settings.seed)
        self.model_info = {"name": name, "version": settings.version}
        self._self_check()

    @classmethod
    def load(
        cls, model_dir: Path, config: dict, device: str = "cpu", name: str = ""
    ) -> TabularModel:
        settings = cls.parse_settings(read_manifest(model_dir), config)
        e, s = settings.export, settings
        runtime = load_runtime(
            s.runtime, model_dir, (e.input_name,), (e.output_name, e.features_name), device,
            s.threads, slots=core_slots(model_dir, s.threads, s.share_cores),
        )  # fmt: skip
        if not (Path(model_dir) / e.head).is_file():
            raise ArchiveError(f"the archive has no {e.head} (the uncertainty head)")
        distance = Distance.load(Path(model_dir) / e.distance, e.schema.width, e.ood_threshold)
        head = MLPHead.load(Path(model_dir) / e.head)
        return cls(settings, runtime, head, distance, name or cls.model)

    def _self_check(self) -> None:
        """A manifest that does not describe its graph (width, classes, head) fails the load."""
        probe = np.stack([self.schema.baseline(), np.zeros(self.schema.width, np.float32)])
        try:
            logits, features = self._forward(probe)
            diff = float(np.max(np.abs(self.head.forward(features) - logits)))
        except Exception as e:
            raise ArchiveError(f"the graph or head does not take the schema's records: {e}") from e
        if logits.shape != (2, len(self.export.classes)):
            raise ArchiveError(f"the graph answers {logits.shape} for 2 records")
        if not diff <= self.settings.self_check_atol:
            raise ArchiveError(f"{self.export.head} does not reproduce the graph's logits ({diff})")

    def _forward(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = self.runtime.run({self.export.input_name: x})
        return out[self.export.output_name], out[self.export.features_name]

    def parse(self, request: Request) -> Records:
        """The body read once, or a typed request (read from tensors) checked as its body would be."""
        if isinstance(request.typed, Records):
            return request.typed.checked(self.schema, self.settings.max_records)
        return read_records(request, self.schema, self.settings.max_records)

    def classify(self, rows: list[dict[str, Any]]) -> list[dict]:
        """Checked records → one answer row each."""
        if not rows:
            return []
        _, features = self._forward(x := self.schema.encode(rows))
        u = classify_with_uncertainty(features, self.head, self.masks, self.export.temperature)
        distances, classes = self.distance(x), self.export.classes
        return [
            {
                "label": classes[int(np.argmax(p))],
                "probabilities": {c: float(v) for c, v in zip(classes, p, strict=True)},
                "uncertainty": {m: float(getattr(u, m)[i]) for m in SCORES}
                | {"samples": u.samples},
                "out_of_range": self.schema.out_of_range(row),
                **self.distance.judge(d),
                "model": dict(self.model_info),
            }
            for i, (p, row, d) in enumerate(zip(u.probabilities, rows, distances, strict=True))
        ]

    def inference(self, parsed: list[Records | RequestError]) -> list[Any]:
        return answered(parsed, self.classify(rows_of(parsed)))

    @property
    def budgets(self) -> tuple[Budget, ...]:
        return (records_budget(self.settings.max_batch_records),)

    @property
    def explain_budgets(self) -> tuple[Budget, ...]:
        s = self.settings
        passes = self.attributor.passes()
        return (explanation_budget(passes, s.max_explain_passes, s.max_batch_explain_passes),)

    def reply(self, answer: Answers) -> Reply:
        return answer.reply()

    def report(self, answers: list[Answers], telemetry: Telemetry) -> None:
        rows = [r for a in answers for r in a.rows]
        telemetry.predictions(r["label"] for r in rows)
        for m in SCORES:
            telemetry.uncertainty(m, [r["uncertainty"][m] for r in rows])

    @cached_property
    def attributor(self) -> Attributor:
        s = self.settings

        def scores(x: np.ndarray) -> np.ndarray:
            return log_odds(self._forward(x.astype(np.float32))[0], self.export.temperature)

        return Attributor(self.schema, scores, s.explain_method, s.explain_samples)

    def explain(self, parsed: list[Records | RequestError]) -> list[Any]:
        """Per feature (Attributor), each record `explain_budgets` admitted before it ran."""
        return [
            Explanations(tuple(self._explain(x) for x in r.rows), r.many)
            if isinstance(r, Records)
            else r
            for r in parsed
        ]

    def _explain(self, row: dict[str, Any]) -> FeatureExplanation:
        [answer] = self.classify([row])
        label = answer["label"]
        target = self.export.classes.index(label)
        values, evaluations = self.attributor.attribute(self.schema.encode([row])[0], target)
        return FeatureExplanation(
            label, answer["probabilities"][label], values, self.settings.explain_method,
            evaluations, answer["out_of_range"], dict(self.model_info),
        )  # fmt: skip
