"""The SLO gate: a run fails (non-zero exit) on any failed request or a p95 over the bound."""

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


def judge(stats, bounds: SloBounds) -> SloVerdict:
    """Verdict over a Locust RequestStats (`environment.stats`)."""
    total = stats.total
    p95 = float(total.get_response_time_percentile(0.95) or 0.0)
    by_protocol: dict[str, int] = {}
    for (_, method), entry in stats.entries.items():
        by_protocol[method] = by_protocol.get(method, 0) + entry.num_requests
    verdict = SloVerdict(total.num_requests, total.num_failures, p95, bounds, by_protocol)
    if total.num_requests == 0:
        verdict.violations.append("no request was made")
    if total.num_failures > bounds.max_failures:
        verdict.violations.append(
            f"{total.num_failures} failed requests (allowed {bounds.max_failures})"
        )
    if p95 > bounds.p95_ms:
        verdict.violations.append(f"p95 {p95:.0f} ms over the {bounds.p95_ms:.0f} ms bound")
    return verdict


def write_verdict(verdict: SloVerdict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(verdict.to_json())
