"""Bounded work per batch: one batch must not hold the worker for seconds while small requests
wait behind it.

TorchServe hands the handler up to `batchSize` requests; what they cost differs by orders of
magnitude (one 10-character text against 32 texts of 256 tokens). The handler admits requests in
arrival order while their summed cost fits the budget and refuses the rest with a fast 503 and
`Retry-After`: the client retries into a later batch instead of everyone waiting for this one. The
first request of a batch is always admitted (each request is bounded by the model's own limits),
so a lone large request is never refused.

A model declares its budgets (`Budget`: the batch's budget, a unit, each request's cost read from
its parsed form, optionally a per-request limit) and the lifecycle applies them in order before
the model's work (`apply`, called by handlers/service.py), for predictions and explanations alike.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from handlers.errors import InternalError, Overloaded, RequestError, TooLarge

log = logging.getLogger(__name__)

__all__ = ["Budget", "Overloaded", "admit", "apply", "bounded", "over_budget", "within_budget"]


@dataclass(frozen=True)
class Budget:
    """One work budget of a batch, as a model declares it."""

    budget: int
    """What the batch may spend: requests past it get 503 + Retry-After (the first always runs)."""
    unit: str
    """What a cost counts, named in the refusal ("tokens", "images", "sample-passes")."""
    cost: Callable[[Any], int | None]
    """A parsed request's cost, read before any of the work (None: it costs nothing here);
    raising a RequestError refuses that request alone."""
    limit: int | None = None
    """One request's most: past it 400 too_large at once (explanations: it would never fit)."""


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


def bounded(
    parsed: Sequence[Any], costs: Sequence[int | None], limit: int, budget: int, unit: str
) -> list[Any]:
    """The batch with requests over the per-request `limit` refused (400) and those past the
    batch `budget` refused (503); `costs[i]` is None for an already refused item."""
    out: list[Any] = []
    kept: list[int | None] = []
    for item, cost in zip(parsed, costs, strict=True):
        if cost is not None and cost > limit:
            out.append(
                TooLarge(
                    f"explaining this request would take {cost} {unit}; the limit is {limit} "
                    "(send a shorter input, or ask /predictions)"
                )
            )
            kept.append(None)
        else:
            out.append(item)
            kept.append(cost)
    return within_budget(out, kept, budget, f"{unit} of explanations")


def apply(
    parsed: Sequence[Any], budgets: Sequence[Budget], ids: Sequence[str | None] | None = None
) -> list[Any]:
    """The batch's parsed requests (RequestErrors among them) through each budget in order: a
    request refused by one costs nothing in the next. A cost that fails otherwise than with a
    RequestError is that request's own 500 (logged with `ids[i]`), never the batch's."""
    items = list(parsed)
    for b in budgets:
        costs: list[int | None] = []
        for i, item in enumerate(items):
            if isinstance(item, RequestError):
                costs.append(None)
                continue
            try:
                costs.append(b.cost(item))
            except RequestError as err:
                items[i] = err
                costs.append(None)
            except Exception:
                rid = ids[i] if ids is not None else None
                log.exception("request %s: pricing it failed", rid)
                items[i] = InternalError(rid)
                costs.append(None)
        if b.limit is not None:
            items = bounded(items, costs, b.limit, b.budget, b.unit)
        else:
            items = within_budget(items, costs, b.budget, b.unit)
    return items
