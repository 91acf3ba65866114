"""handlers.telemetry: what it sends through context.metrics, in the form TorchServe's frontend keeps."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import yaml

from handlers import telemetry
from handlers.errors import BadField
from handlers.telemetry import METRICS, Telemetry

ROOT = Path(__file__).resolve().parents[2]

# The frontend's parser for a backend metric line (org.pytorch.serve.metrics.Metric.PATTERN, 0.12).
FRONTEND_PATTERN = re.compile(
    r"\s*([\w\s]+)\.([\w\s]+):([0-9\-,.e]+)\|#([^|]*)(\|#type:([^|,]+))?\|#hostname:([^,]+),([^,]+)(,(.*))?"
)


class FakeMetrics:
    """Records what TorchServe's MetricsCacheYamlImpl.add_metric would receive."""

    def __init__(self, fail: bool = False):
        self.calls: list[tuple[str, float, str, dict[str, str], str]] = []
        self.fail = fail

    def add_metric(self, name, value, unit, idx=None, dimensions=(), metric_type=None):
        if self.fail:
            raise RuntimeError("metrics backend down")
        dims = {d.name: d.value for d in dimensions}
        self.calls.append((name, value, unit, dims, getattr(metric_type, "value", metric_type)))

    def values(self, name: str, **dims: str) -> list[float]:
        return [
            v
            for n, v, _, d, _ in self.calls
            if n == name and all(d.get(k) == x for k, x in dims.items())
        ]


@pytest.fixture
def fake():
    return FakeMetrics()


@pytest.fixture
def tel(fake):
    return Telemetry(fake, "sentiment")


def declared_model_metrics() -> dict[str, tuple[str, list[str]]]:
    spec = yaml.safe_load((ROOT / "metrics.yaml").read_text())["model_metrics"]
    return {m["name"]: (kind, m["dimensions"]) for kind, items in spec.items() for m in items}


def test_metrics_yaml_declares_every_telemetry_metric_with_its_type_and_dimension_order():
    declared = declared_model_metrics()
    for name, spec in METRICS.items():
        assert name in declared, (
            f"{name} is not in metrics.yaml model_metrics: TorchServe would drop it"
        )
        kind, dims = declared[name]
        assert kind == spec.type
        assert tuple(dims) == spec.dimensions, (
            f"{name}: the frontend pairs dimension values by position"
        )


def test_emitted_lines_parse_with_the_frontend_pattern_and_declared_dimensions(caplog):
    """Through TorchServe's real metrics cache, loaded from the repository's metrics.yaml."""
    from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl

    cache = MetricsCacheYamlImpl(str(ROOT / "metrics.yaml"))
    cache.initialize_cache()
    cache.set_request_ids({0: "req-0", 1: "req-1"})
    tel = Telemetry(cache, "sentiment")
    with caplog.at_level(logging.INFO, logger="ts.metrics"):
        with tel.stage("inference"):
            pass
        tel.batch(2)
        tel.refused_error(BadField("x"), "req-1")
        tel.predictions(["positive"])
        tel.truncated(1)
        tel.windows([4])
        tel.uncertainty("entropy", [0.25])
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[METRICS]")]
    assert not [r for r in caplog.records if "Failed to update metric" in r.getMessage()]
    seen = set()
    for line in lines:
        m = FRONTEND_PATTERN.fullmatch(line.removeprefix("[METRICS]"))
        assert m, f"the frontend would not parse {line!r}"
        name, dims = m.group(1), [d.split(":") for d in m.group(4).split(",")]
        assert all(len(pair) == 2 for pair in dims), f"a dimension would be dropped in {line!r}"
        assert [k for k, _ in dims] == list(METRICS[name].dimensions)
        assert m.group(6) == METRICS[name].type.upper()
        assert dict(dims)["ModelName"] == "sentiment"
        seen.add(name)
    assert seen == set(METRICS)


def test_stage_is_timed_in_seconds_even_when_the_block_raises(tel, fake):
    with pytest.raises(ValueError), tel.stage("preprocess"):
        raise ValueError("bad batch")
    [(name, value, unit, dims, kind)] = fake.calls
    assert (name, unit, dims["Stage"], kind) == (
        telemetry.STAGE_SECONDS,
        "s",
        "preprocess",
        "histogram",
    )
    assert 0 <= value < 1


def test_predictions_count_each_label_once_per_batch(tel, fake):
    tel.predictions(["positive", "negative", "positive", "positive"])
    assert fake.values(telemetry.PREDICTIONS, Label="positive") == [3]
    assert fake.values(telemetry.PREDICTIONS, Label="negative") == [1]
    assert len(fake.calls) == 2


def test_uncertainty_observes_once_per_prediction_and_skips_non_finite(tel, fake):
    tel.uncertainty("mutual_information", [0.1, 0.0, float("nan"), 0.3])
    assert fake.values(telemetry.UNCERTAINTY, Measure="mutual_information") == [0.1, 0.0, 0.3]


def test_windows_observe_once_per_request_and_truncation_counts_only_when_nonzero(tel, fake):
    tel.windows([1, 7, 30])
    tel.truncated(0)
    tel.truncated(2)
    assert fake.values(telemetry.WINDOWS) == [1, 7, 30]
    assert fake.values(telemetry.TRUNCATED) == [2]


def test_label_values_never_break_the_metric_line(tel, fake):
    tel.predictions(["a,b:c|d#e f", ""])
    labels = sorted(d["Label"] for *_, d, _ in fake.calls)
    assert labels == ["a_b_c_d_e_f", "none"]


def test_refused_counts_by_reason_and_logs_one_json_line_without_the_body(tel, fake, caplog):
    body = "my secret review text"
    err = BadField("field 'text' must be a string")
    with caplog.at_level(logging.INFO, logger="handlers.telemetry"):
        tel.refused_error(err, "req-7")
    assert fake.values(telemetry.REFUSED, Reason="bad_field") == [1]
    [record] = [r for r in caplog.records if r.name == "handlers.telemetry"]
    line = record.getMessage()
    assert "\n" not in line and body not in line
    assert json.loads(line) == {
        "event": "request_refused",
        "model": "sentiment",
        "reason": "bad_field",
        "status": 400,
        "request_id": "req-7",
        "detail": "field 'text' must be a string",
    }


def test_a_failing_metrics_backend_never_fails_the_batch(caplog):
    tel = Telemetry(FakeMetrics(fail=True), "frequency")
    with caplog.at_level(logging.WARNING, logger="handlers.telemetry"):
        tel.batch(4)
        with tel.stage("inference"):
            pass
    assert sum("could not emit" in r.getMessage() for r in caplog.records) == 2


def test_request_id_reads_the_batch_index_from_the_context():
    class Ctx:
        request_ids = {0: "a", 1: "b"}

    assert telemetry.request_id(Ctx(), 1) == "b"
    assert telemetry.request_id(Ctx(), 5) is None
    assert telemetry.request_id(object(), 0) is None


def sentiment_answer(label: str, entropy: float, truncated: bool = False) -> dict:
    return {
        "label": label,
        "uncertainty": {
            "entropy": entropy,
            "mutual_information": entropy / 10,
            "std": entropy / 2,
            "samples": 8,
        },
        "truncated": truncated,
    }


def service_with(model_cls, tel):
    """The lifecycle over a model whose predictor is never called (replies and reports only)."""
    from handlers.service import ModelService
    from handlers.settings import ServingSettings

    model = model_cls.__new__(model_cls)
    model.name = "m"
    model.settings = ServingSettings()  # every model has settings; the defaults do here
    return ModelService(model, tel)


def test_a_mixed_sentiment_batch_is_reported_as_the_traffic_implies(tel, fake, caplog):
    from handlers.kits.text.codec import Classification
    from handlers.sentiment.model import SentimentModel

    batch = [
        Classification((sentiment_answer("positive", 0.1, truncated=True),), many=False),
        BadField("missing field 'text'"),
        Classification(
            (sentiment_answer("negative", 0.6), sentiment_answer("positive", 0.2)), many=True
        ),  # one request, two texts
    ]
    with caplog.at_level(logging.INFO, logger="handlers.telemetry"):
        service_with(SentimentModel, tel)._reply(batch, ["r0", "r1", "r2"])
    assert fake.values(telemetry.BATCH_SIZE) == [3]
    assert fake.values(telemetry.REFUSED, Reason="bad_field") == [1]
    assert json.loads(caplog.records[0].getMessage())["request_id"] == "r1"
    assert fake.values(telemetry.PREDICTIONS, Label="positive") == [2]
    assert fake.values(telemetry.PREDICTIONS, Label="negative") == [1]
    assert fake.values(telemetry.TRUNCATED) == [1]
    assert fake.values(telemetry.UNCERTAINTY, Measure="entropy") == [0.1, 0.6, 0.2]
    assert len(fake.values(telemetry.UNCERTAINTY, Measure="mutual_information")) == 3
    assert fake.values(telemetry.UNCERTAINTY, Measure="samples") == []  # a count, not a score


def test_frequency_windows_are_observed_once_per_one_shot_request(tel, fake):
    import numpy as np

    from handlers.frequency.engine import Components
    from handlers.frequency.model import FrequencyModel
    from handlers.kits.signal.predict import Extraction

    comp = Components(np.zeros((1, 4), np.float32), np.full((1, 4), 0.5, np.float32))
    answers = [Extraction((1.0,), comp, 5), Extraction((1.0,), comp, None, "state", 4)]
    FrequencyModel.report(None, answers + [Extraction((1.0,), comp, 1)], tel)  # type: ignore[arg-type]
    assert fake.values(telemetry.WINDOWS) == [5, 1]  # the stream chunk has none
    # one counter line per label for the whole batch: 3 answers, one increment of 3
    assert fake.values(telemetry.PREDICTIONS, Label="1Hz") == [3]


def test_extractions_count_one_prediction_per_component_with_its_mean_std(tel, fake):
    import numpy as np

    tel.extractions(
        [
            ((1.0, 3.5), [np.array([0.1, 0.3]), np.array([0.2, 0.2])]),
            ((1.0,), [np.array([0.4, 0.6])]),
        ]
    )
    assert fake.values(telemetry.PREDICTIONS, Label="1Hz") == [2]  # one line for the batch
    assert fake.values(telemetry.PREDICTIONS, Label="3.5Hz") == [1]
    assert fake.values(telemetry.UNCERTAINTY, Measure="std") == pytest.approx([0.2, 0.2, 0.5])
