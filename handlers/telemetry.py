"""What a handler reports to the operator: stage latencies, batch sizes, refused requests, predicted
labels and the uncertainty distribution, as TorchServe custom metrics (Prometheus via the frontend)
plus one JSON log line per refused request.

A thin layer over TorchServe's `context.metrics`; nothing from TorchServe is imported at module level
so it is unit-tested with a fake metrics object. Facts about TorchServe 0.12 it is built on:
- in prometheus mode the frontend keeps only metrics declared under `model_metrics` in metrics.yaml
  (`METRICS` below mirrors that file; a unit test keeps the two equal);
- the frontend pairs the dimension *values* of a metric line with the *names* declared in the yaml by
  position, so every call passes all dimensions explicitly, in the declared order;
- histograms use the Prometheus client's default buckets (5 ms .. 10 s), hence times in seconds.
Telemetry must never fail a batch: every emission swallows and logs its own errors.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from handlers.errors import REQUEST_ID_HEADER, RequestError, valid_request_id

logger = logging.getLogger(__name__)

COUNTER, GAUGE, HISTOGRAM = "counter", "gauge", "histogram"


@dataclass(frozen=True)
class MetricSpec:
    type: str
    """counter, gauge or histogram: the section of metrics.yaml `model_metrics` it is declared in."""
    unit: str
    labels: tuple[str, ...]
    """Dimensions before the ModelName and Level every model metric carries."""

    @property
    def dimensions(self) -> tuple[str, ...]:
        return (*self.labels, "ModelName", "Level")


STAGE_SECONDS = "ts_handler_stage_seconds"
BATCH_SIZE = "ts_handler_batch_size"
REFUSED = "ts_handler_refused_requests_total"
PREDICTIONS = "ts_handler_predictions_total"
TRUNCATED = "ts_handler_truncated_texts_total"
WINDOWS = "ts_handler_windows_per_request"
UNCERTAINTY = "ts_handler_uncertainty"

METRICS: dict[str, MetricSpec] = {
    STAGE_SECONDS: MetricSpec(HISTOGRAM, "s", ("Stage",)),
    BATCH_SIZE: MetricSpec(HISTOGRAM, "count", ()),
    REFUSED: MetricSpec(COUNTER, "count", ("Reason",)),
    PREDICTIONS: MetricSpec(COUNTER, "count", ("Label",)),
    TRUNCATED: MetricSpec(COUNTER, "count", ()),
    WINDOWS: MetricSpec(HISTOGRAM, "count", ()),
    UNCERTAINTY: MetricSpec(HISTOGRAM, "score", ("Measure",)),
}
"""Every custom metric a handler emits; metrics.yaml `model_metrics` declares exactly these."""

STAGES = ("preprocess", "inference", "postprocess")

# The frontend splits a metric line on , : | # and drops a dimension with an empty value.
_UNSAFE = re.compile(r"[,:|#\s]+")


def _label(value: object) -> str:
    return _UNSAFE.sub("_", str(value)).strip("_") or "none"


@dataclass(frozen=True)
class _Dimension:
    """Duck-types ts.metrics.dimension.Dimension (name, value, and the "name:value" string)."""

    name: str
    value: str

    def __str__(self) -> str:
        return f"{self.name}:{self.value}"


def _metric_types() -> dict[str, Any]:
    """TorchServe's MetricTypes enum when it is installed; plain strings for fakes otherwise."""
    try:
        from ts.metrics.metric_type_enum import MetricTypes
    except ImportError:  # pragma: no cover - the venv has torchserve; a bare env still works
        return {t: t for t in (COUNTER, GAUGE, HISTOGRAM)}
    return {t.value: t for t in MetricTypes}


class Telemetry:
    """One per handler, made in `initialize`: `Telemetry(context.metrics, context.model_name)`."""

    def __init__(self, metrics: Any, model_name: str):
        self._metrics = metrics
        self.model_name = model_name
        self._types = _metric_types()

    def emit(self, name: str, value: float, **labels: object) -> None:
        """Send one observation (histogram), increment (counter) or value (gauge) of `name`."""
        spec = METRICS[name]
        if self._metrics is None or not math.isfinite(value):
            return  # the frontend's line parser rejects inf/nan; better one missing point than noise
        dims = [_Dimension(d, _label(labels[d])) for d in spec.labels]
        dims += [_Dimension("ModelName", _label(self.model_name)), _Dimension("Level", "Model")]
        try:
            self._metrics.add_metric(
                name, float(value), spec.unit, None, dims, metric_type=self._types[spec.type]
            )
        except Exception:  # why: a metric must never turn a good batch into a 503
            logger.warning("telemetry: could not emit %s", name, exc_info=True)

    @contextmanager
    def stage(self, stage: str) -> Iterator[None]:
        """Time one handler stage of a batch (preprocess / inference / postprocess), in seconds."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.emit(STAGE_SECONDS, time.perf_counter() - start, Stage=stage)

    def batch(self, size: int) -> None:
        """The batch TorchServe actually formed (requests handed to one `handle` call)."""
        self.emit(BATCH_SIZE, size)

    def refused_error(self, error: RequestError, request_id: str | None) -> None:
        """A refused request: counted by its kind (a short, bounded label), and one JSON log line
        with its reason (which, by the error catalogue's contract, never echoes the body)."""
        self.emit(REFUSED, 1, Reason=error.kind)
        record = {
            "event": "request_refused",
            "model": self.model_name,
            "reason": error.kind,
            "status": error.status,
            "request_id": request_id,
        }
        if error.reason:
            record["detail"] = error.reason
        logger.warning(json.dumps(record, sort_keys=True))

    def truncated(self, count: int) -> None:
        """Texts cut to the model's maximum length in this batch."""
        if count:
            self.emit(TRUNCATED, count)

    def windows(self, per_request: Iterable[int]) -> None:
        """Windows each request was split into (windowed models): one histogram observation per request."""
        for n in per_request:
            self.emit(WINDOWS, n)

    def predictions(self, labels: Iterable[object]) -> None:
        """Predicted labels of the answered requests, one counter increment per distinct label."""
        for label, n in Counter(_label(v) for v in labels).items():
            self.emit(PREDICTIONS, n, Label=label)

    def uncertainty(self, measure: str, values: Iterable[float]) -> None:
        """One observation per prediction of an uncertainty score (entropy, mutual_information, std)."""
        for v in values:
            self.emit(UNCERTAINTY, float(v), Measure=measure)

    def extractions(self, answers: Iterable[tuple[Iterable[float], Any]]) -> None:
        """Signal decomposition, for a batch's (frequencies, stds) answers: one prediction per
        extracted component, labelled by its Hz (one counter line per label for the whole batch),
        with the component's mean MC-dropout std as its uncertainty score (stds None: an answer
        asked without the band, counted with no score)."""
        pairs = [
            (f, None if stds is None else _mean(stds[j]))
            for frequencies, stds in answers
            for j, f in enumerate(frequencies)
        ]
        self.predictions(f"{f:g}Hz" for f, _ in pairs)
        self.uncertainty("std", [m for _, m in pairs if m is not None])


def _mean(values: Any) -> float:
    # One numpy pass: a Python float per sample costs more than the bare model's share.
    arr = np.asarray(values, dtype=np.float64).ravel()
    return float(arr.mean()) if arr.size else math.nan


def request_id(context: Any, idx: int, headers: Mapping[str, Any] | None = None) -> str | None:
    """The request id of batch item `idx`: the client's or the door's X-Request-ID header when it is
    an acceptable one (handlers/errors.valid_request_id), else TorchServe's own request id (None
    outside a server). It is the Request's `id`: in its log lines, its error body and the
    X-Request-ID header of its answer."""
    for name, value in (headers or {}).items():
        is_id = isinstance(name, str) and name.lower() == REQUEST_ID_HEADER.lower()
        if is_id and (rid := valid_request_id(value)) is not None:
            return rid
    ids = getattr(context, "request_ids", None)
    return ids.get(idx) if isinstance(ids, dict) else None
