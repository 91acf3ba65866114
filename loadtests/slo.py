"""The SLO gate: a run fails (non-zero exit) on any failed request or a p95 over the bound.

Plain data in, verdict out: no Locust import (it would gevent-patch whoever imports this)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class SloBounds:
    p95_ms: float = 2000.0
    """Bound on the 95th percentile latency over all requests, milliseconds."""
    max_failures: int = 0
    """Failed requests tolerated (0: any failure fails the run)."""


@dataclass
class SloVerdict:
    requests: int
    failures: int
    p95_ms: float
    bounds: SloBounds
    by_protocol: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_json(self) -> str:
        return json.dumps(asdict(self) | {"passed": self.passed}, indent=2)


def judge(
    requests: int,
    failures: int,
    p95_ms: float | None,
    by_protocol: dict[str, int],
    bounds: SloBounds,
) -> SloVerdict:
    """The verdict over a run's totals (the locustfile reads them from Locust's stats)."""
    p95 = float(p95_ms or 0.0)
    verdict = SloVerdict(requests, failures, p95, bounds, dict(by_protocol))
    if requests == 0:
        verdict.violations.append("no request was made")
    if failures > bounds.max_failures:
        verdict.violations.append(f"{failures} failed requests (allowed {bounds.max_failures})")
    if p95 > bounds.p95_ms:
        verdict.violations.append(f"p95 {p95:.0f} ms over the {bounds.p95_ms:.0f} ms bound")
    return verdict


def write_verdict(verdict: SloVerdict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(verdict.to_json())
