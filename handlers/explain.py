"""What every model's explanations share: a bounded cost per request and per batch, and one way to
write an explanation as an answer.

An explanation costs many forward passes (one per word, pixel or signal block, or more): each
model prices a request before running it (`cost`), in a unit that tracks worker time (token-passes,
pixel-passes, sample-passes). A request costing more than the model's per-request limit is refused
at once with 400 `too_large` (it would never fit); past the batch's explanation budget, requests
get 503 + Retry-After like predictions past theirs (both applied by the lifecycle from the
model's declared `explain_budgets`, handlers/budget.py). The worker is never held
by explanations for longer than one budget's worth, and while predictions are being served,
explanations get at most their share of the worker (`WorkShare`, `explain_share` 0.25): predictions
keep at least the rest. The share is work-conserving: on a worker that serves no prediction load,
explanations run back to back.
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
    seconds while predictions compete for it; then they are refused (503 + Retry-After) without
    running.

    Predictions compete when one waits in the same batch as the explanations, or when predictions
    took at least `contended` of the worker's time over the window (a prediction load, not a lone
    client's occasional request). Otherwise the worker would sit idle, and explanations run at
    once whatever they spent before (work-conserving). A prediction that arrives while an admitted
    explanation runs waits for it: at most one batch's explanation budget.
    """

    def __init__(
        self,
        share: float,
        window_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
        contended: float = 0.05,
    ):
        self.share, self.window_s, self.clock, self.contended = share, window_s, clock, contended
        self.spans: deque[tuple[float, float]] = deque()
        """Explanations' work: (begin, end) in `clock` seconds."""
        self.predicted: deque[tuple[float, float]] = deque()
        """Predictions' work, likewise."""

    def _within(self, spans: deque[tuple[float, float]]) -> float:
        start = self.clock() - self.window_s
        while spans and spans[0][1] <= start:
            spans.popleft()
        return sum(end - max(begin, start) for begin, end in spans)

    def spent(self) -> float:
        """Seconds of explanation work within the window."""
        return self._within(self.spans)

    def contested(self) -> bool:
        """Predictions took at least `contended` of the worker over the window."""
        return self._within(self.predicted) >= self.contended * self.window_s

    def allows(self, predictions_waiting: bool = False) -> bool:
        if not (predictions_waiting or self.contested()):
            return True
        return self.spent() < self.share * self.window_s

    def record(self, begin: float, end: float) -> None:
        self.spans.append((begin, end))

    def record_predictions(self, begin: float, end: float) -> None:
        self.predicted.append((begin, end))

    def refusal(self) -> Overloaded:
        return Overloaded(
            f"explanations have used their share ({self.share:.0%}) of this worker over the last "
            f"{self.window_s:g} s while predictions are served; retry after "
            f"{Overloaded.retry_after_s} s"
        )
