"""Bounded work per batch: one batch must not hold the worker for seconds while small requests
wait behind it.

TorchServe hands the handler up to `batchSize` requests; what they cost differs by orders of
magnitude (one 10-character text against 32 texts of 256 tokens). The handler admits requests in
arrival order while their summed cost fits the budget and refuses the rest with a fast 503 and
`Retry-After`: the client retries into a later batch instead of everyone waiting for this one. The
first request of a batch is always admitted (each request is bounded by the model's own limits),
so a lone large request is never refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from handlers.errors import Overloaded

__all__ = ["Overloaded", "admit", "over_budget", "within_budget"]


def admit(costs: Sequence[int | None], budget: int) -> list[bool]:
    """Which requests run: in order, while the running cost fits `budget`. `None` is a request
    that is not run anyway (already refused): it costs nothing and is not admitted."""
    admitted, spent = [], 0
    for cost in costs:
        if cost is None:
            admitted.append(False)
            continue
        ok = spent == 0 or spent + cost <= budget
        admitted.append(ok)
        if ok:
            spent += cost
    return admitted


def over_budget(budget: int, unit: str = "tokens") -> Overloaded:
    return Overloaded(
        f"the server is busy: this batch's work budget ({budget} {unit}) is spent; "
        f"retry after {Overloaded.retry_after_s} s"
    )


def within_budget(
    parsed: Sequence[Any], costs: Sequence[int | None], budget: int, unit: str
) -> list[Any]:
    """The batch with every request past `budget` replaced by its 503 `Overloaded`; `costs[i]` is
    None for an item that is not run anyway (already a RequestError)."""
    return [
        item if fits or cost is None else over_budget(budget, unit)
        for item, cost, fits in zip(parsed, costs, admit(costs, budget), strict=True)
    ]
