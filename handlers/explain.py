"""What every model's explanations share: a bounded cost per request and per batch, and one way to
write an explanation as an answer.

An explanation costs many forward passes (one per word, pixel or signal block, or more): each
model prices a request before running it (`cost`), in a unit that tracks worker time (token-passes,
pixel-passes, sample-passes). A request costing more than the model's per-request limit is refused
at once with 400 `too_large` (it would never fit); past the batch's explanation budget, requests
get 503 + Retry-After like predictions past theirs (both applied by the lifecycle from the
model's declared `explain_budgets`, handlers/budget.py). The worker is never held
by explanations for longer than one budget's worth, and over time explanations get at most their
share of the worker (`WorkShare`, `explain_share` 0.25): predictions keep at least the rest.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from handlers.codec import Reply
from handlers.errors import Overloaded


class JsonExplanation:
    """An explanation answer: `to_json()` (numpy arrays allowed) written as the JSON body."""

    def to_json(self) -> Any:
        raise NotImplementedError

    def reply(self) -> Reply:
        body = orjson.dumps(self.to_json(), option=orjson.OPT_SERIALIZE_NUMPY)
        return Reply(body, "application/json", {})


@dataclass(frozen=True)
class Explanations(JsonExplanation):
    """The explanation of one request with one item or many: one explanation per item, in order,
    a list for a many-item request ({"texts": [...]}, {"images": [...]})."""

    explanations: tuple[Any, ...]
    many: bool

    def to_json(self) -> Any:
        bodies = [e.to_json() for e in self.explanations]
        return bodies if self.many else bodies[0]


class WorkShare:
    """Explanations may take at most `share` of this worker's time over the last `window_s`
    seconds; past it they are refused (503 + Retry-After) without running."""

    def __init__(
        self, share: float, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ):
        self.share, self.window_s, self.clock = share, window_s, clock
        self.spans: deque[tuple[float, float]] = deque()

    def spent(self) -> float:
        """Seconds of explanation work within the window."""
        start = self.clock() - self.window_s
        while self.spans and self.spans[0][1] <= start:
            self.spans.popleft()
        return sum(end - max(begin, start) for begin, end in self.spans)

    def allows(self) -> bool:
        return self.spent() < self.share * self.window_s

    def record(self, begin: float, end: float) -> None:
        self.spans.append((begin, end))

    def refusal(self) -> Overloaded:
        return Overloaded(
            f"explanations have used their share ({self.share:.0%}) of this worker over the last "
            f"{self.window_s:g} s; retry after {Overloaded.retry_after_s} s (predictions are served)"
        )
