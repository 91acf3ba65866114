"""What `make check-served` (deploy/check_served.py) asks a served model: each model's
training package has a `heldout.py` whose `served_check(manifest, artifacts)` gives the requests,
made from the training code's own held-out split, and judges the served answers against the
dataset's labels and the training report's figures."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ALPHA = 1e-3
"""A model as good as its report misses a binomial bar (`binomial_floor`) this rarely."""


@dataclass
class Outcome:
    model: str
    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def check(self, ok: bool, what: str) -> None:
        (self.lines if ok else self.failures).append(what)


@dataclass(frozen=True)
class HeldOut:
    """One model's held-out requests and how its answers are judged."""

    bodies: list[dict]
    """JSON request bodies, sent one after another (each also a row of the MLflow PyFunc)."""
    judge: Callable[[list[Any], Outcome], None]
    """Checks the served answers (one per body) against the known truth, into the Outcome."""


def binomial_floor(n: int, p: float, alpha: float = ALPHA) -> int:
    """The largest k with P(X < k) <= alpha for X ~ Binomial(n, p): the count of right answers
    a model whose accuracy is p reaches on n held-out items but with probability alpha."""
    below, k = 0.0, 0
    for i in range(n + 1):
        if below > alpha:
            break
        k = i
        below += math.comb(n, i) * p**i * (1 - p) ** (n - i)
    return k
