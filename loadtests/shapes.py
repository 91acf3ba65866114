"""Load shapes: a steady ramp and a spike, as pure functions of time.

The locustfile's `ConfiguredShape` picks one by `--shape steady|spike` (or LOADTEST_SHAPE) at run
time. Nothing here imports Locust: importing it monkey-patches the whole process with gevent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Tick = tuple[int, float] | None


@dataclass(frozen=True)
class ShapeSettings:
    users: int = 8
    """Users at the plateau (steady) or the baseline (spike)."""
    duration_s: float = 60.0
    """Whole run; the shape returns None (stop) after it."""
    ramp_s: float = 10.0
    """Steady: seconds to ramp from 0 to `users`."""
    spike_users: int = 32
    """Spike: users during the spike."""
    spike_at_s: float = 20.0
    """Spike: when it starts."""
    spike_s: float = 10.0
    """Spike: how long it lasts."""

    @classmethod
    def from_options(cls, options) -> ShapeSettings:
        return cls(
            users=options.peak_users,
            duration_s=options.duration_s,
            ramp_s=options.ramp_s,
            spike_users=options.spike_users,
            spike_at_s=options.spike_at_s,
            spike_s=options.spike_s,
        )


def steady_ramp(t: float, s: ShapeSettings) -> Tick:
    """Ramp linearly to `users` over `ramp_s`, hold until `duration_s`."""
    if t >= s.duration_s:
        return None
    rate = s.users / s.ramp_s if s.ramp_s > 0 else float(s.users)
    return s.users, max(rate, 1.0)


def spike(t: float, s: ShapeSettings) -> Tick:
    """`users` as a baseline, jump to `spike_users` at `spike_at_s` for `spike_s`, then back."""
    if t >= s.duration_s:
        return None
    in_spike = s.spike_at_s <= t < s.spike_at_s + s.spike_s
    # Spawn (and retire) the spike's users within about a second: that is what makes it a spike.
    return (
        (s.spike_users, float(s.spike_users))
        if in_spike
        else (s.users, float(max(s.users, s.spike_users)))
    )


SHAPES: dict[str, Callable[[float, ShapeSettings], Tick]] = {"steady": steady_ramp, "spike": spike}
