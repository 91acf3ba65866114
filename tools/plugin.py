"""What a model's tools/<name>/samples.py declares for the shared tools: one typed `Samples`
value named `SAMPLES`, so mypy checks each hook's type where the model declares it and where a tool
reads it (`tools.registry.ToolSpec.samples()`), and a misspelt hook is a type error, not "this model
does not support it". docs/adding-a-model.md lists each field."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Samples:
    example: Mapping[str, Any] = field(default_factory=dict)
    """One valid JSON body: probes, fuzzing, neighbours, the flood's victims."""
    binary_example: Callable[[], tuple[bytes, str, dict[str, str]] | None] | None = None
    """A valid non-JSON body (bytes, content type, headers) for the surface tests."""
    payloads: Callable[..., Callable[[], dict]] | None = None
    """payloads(seed=...) → a draw of load-test request bodies, deterministic per seed."""
    bench_feed: Callable[..., list[dict]] | None = None
    """bench_feed(n, seed=0, **opts): `python -m bench`'s `n` bodies of one fixed shape."""
    bench_arguments: Callable[[Any], None] | None = None
    """`python -m bench` options of its own (an argparse group); their values reach bench_feed."""
    bench_bodies: tuple[str, ...] = ()
    """Body kinds bench sends it ("json", "float32"); empty: JSON only, no handler timing."""
    fp16_atol: Callable[[], float] | None = None
    """bench/gpu_check.py: the serving fp16 gate a GPU run is checked against."""
    train_args: Callable[[], list[str]] | None = None
    """Extra `python -m training.<name>` options `make train` passes."""
    load_weight: int = 1
    """Load-test tasks of this model per task of a weight-1 model."""
    load_cost: int = 1
    """Relative serving cost: the cheapest model takes the destructive (fault) tests."""
    state_key: str | None = None
    """The variable naming its signing-key file; the pods mount the one Secret there."""
    light_request: Callable[[int], dict] | None = None
    """A small varied body: the rehearsal's Locust users send the first model that has it."""
