"""Which encoder runtime a CPU class serves: the rule `make bench-runtimes` applies (pure, no runtime
imported, so CI's unit tier tests it without OpenVINO installed).

A candidate is adopted only where it is at least `MIN_SPEEDUP` times as fast as ONNX Runtime int8
(the served default it would replace) AND it passed the same parity and accuracy gate as today's
int8 (training.sentiment.quantize.judge: no refusal reasons). Of the adopted, the fastest wins;
with none, ONNX Runtime stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

MIN_SPEEDUP = 1.2
KEEP = "keep ONNX Runtime"


@dataclass(frozen=True)
class Candidate:
    name: str
    speedup: float | None
    """Texts/s over ONNX Runtime int8's, in the same interleaved run (None: not measured)."""
    gate_reasons: Sequence[str] = field(default_factory=tuple)
    """Why the parity/accuracy gate refused it; empty: it passed."""


@dataclass(frozen=True)
class Choice:
    runtime: str | None
    """The adopted candidate's name; None: keep ONNX Runtime."""
    why: dict[str, str]
    """Each candidate's verdict in words."""

    @property
    def decision(self) -> str:
        return f"adopt {self.runtime}" if self.runtime else KEEP


def choose_runtime(candidates: Sequence[Candidate], min_speedup: float = MIN_SPEEDUP) -> Choice:
    why: dict[str, str] = {}
    passing: list[Candidate] = []
    for c in candidates:
        problems = []
        if c.speedup is None:
            problems.append("not measured")
        elif c.speedup < min_speedup:
            problems.append(f"{c.speedup:.2f}x ONNX Runtime int8, under {min_speedup:.2f}x")
        if c.gate_reasons:
            problems.append("gate refused: " + "; ".join(c.gate_reasons))
        if problems:
            why[c.name] = "not adopted: " + "; ".join(problems)
        else:
            why[c.name] = f"passes: {c.speedup:.2f}x ONNX Runtime int8 and the gate"
            passing.append(c)
    best = max(passing, key=lambda c: c.speedup or 0.0, default=None)
    return Choice(best.name if best else None, why)
