"""The handlers' own metrics (handlers/telemetry.py) in Prometheus format, from the OIP server.

Under TorchServe a handler's `Telemetry` writes to `context.metrics`, and TorchServe's metrics
listener exports them. Here the same `Telemetry` writes to `PrometheusMetrics`, which has the one
method it calls (`add_metric`) and keeps each metric in a `prometheus_client` registry under the
same name, type and labels as TorchServe's export (`ts_handler_refused_requests_total{Reason,
ModelName, Level}`, histograms with the client's default buckets), so the dashboards and alerts
read either runtime. `serve` exports the registry on a listener of its own (`--metrics-port`,
on the server's host: loopback in a pod, where the door's metrics port passes `GET /metrics` only).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from handlers.telemetry import COUNTER, HISTOGRAM, METRICS


class PrometheusMetrics:
    """`context.metrics` for `Telemetry`: each declared metric (telemetry.METRICS) in `registry`."""

    def __init__(self) -> None:
        import prometheus_client as prom

        self.registry = prom.CollectorRegistry()
        self._metrics: dict[str, Any] = {}
        for name, spec in METRICS.items():
            kind = {COUNTER: prom.Counter, HISTOGRAM: prom.Histogram}.get(spec.type, prom.Gauge)
            self._metrics[name] = kind(
                name, f"{name} ({spec.unit})", spec.dimensions, registry=self.registry
            )

    def add_metric(
        self,
        name: str,
        value: float,
        unit: str,
        idx: Any,
        dimensions: Sequence[Any],
        metric_type: Any = None,
    ) -> None:
        """TorchServe's signature: one observation (histogram), increment (counter) or value
        (gauge); the dimensions in the declared order (ModelName and Level last)."""
        spec = METRICS[name]
        given = {str(d.name): str(d.value) for d in dimensions}
        child = self._metrics[name].labels(*(given[d] for d in spec.dimensions))
        # prometheus_client's values lock themselves: observations from many workers add up.
        if spec.type == COUNTER:
            child.inc(value)
        elif spec.type == HISTOGRAM:
            child.observe(value)
        else:
            child.set(value)


def serve(metrics: PrometheusMetrics, host: str, port: int) -> None:
    """Export `metrics` (and the process's default registry: KServe's own request metrics) on
    http://host:port/metrics, in a thread of its own."""
    import prometheus_client as prom

    registry = prom.CollectorRegistry()
    registry.register(metrics.registry)  # a registry collects as one collector
    registry.register(prom.REGISTRY)
    prom.start_http_server(port, addr=host, registry=registry)
