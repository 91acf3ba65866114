"""What a model's tool parts declare for the shared tools, as typed values: `SAMPLES` (a `Samples`)
in tools/<name>/samples.py, `CLI` (a `Cli`) in its cli.py, `BENCH` (a `Bench`) in its bench.py,
`REHEARSAL` (a `Rehearsal`) in its rehearsal.py, `OVERLOAD` (an `Overload`) in its overload.py.
mypy checks each hook's type where the model declares it and where a tool reads it
(`tools.registry.ToolSpec.samples()`, `.cli()`, `.bench()`, `.rehearsal()`, `.overload()`), and a
misspelt hook is a type error, not "this model does not support it". docs/adding-a-model.md lists
each field."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
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
    export: Callable[[], Mapping[str, Any]] | None = None
    """export() → what the tools may take of its export (the manifest's `handler` block) where no
    manifest is read: a signal model's `frequencies` and `sample_rate` (reliability/costly.py's
    worst cases)."""


@dataclass(frozen=True)
class Cli:
    """`python -m clients` parts of a model (tools/<name>/cli.py). Option names must not clash with
    another model's."""

    arguments: Callable[[Any], None] | None = None
    """arguments(group): adds `predict`/`explain` options to an argparse group."""
    request: Callable[[argparse.Namespace], dict | None] | None = None
    """request(args): the JSON body from its options (None when none was given)."""
    predict: Callable[[Any, argparse.Namespace, Any], Any] | None = None
    """predict(client, args, payload): the answer, called its own way (a binary body, say), or None."""
    stream_arguments: Callable[[Any], None] | None = None
    """stream_arguments(group): `python -m clients stream` options."""
    stream: Callable[[Any, argparse.Namespace, str | None], Any] | None = None
    """stream(client, args, state): an object with `.send(chunk)` and `.state`: the model streams."""
    view: Callable[[Any, argparse.Namespace, Any, Any, Path], Any] | None = None
    """view(client, args, payload, answer, path): writes an explanation's page or image."""


@dataclass(frozen=True)
class Bench:
    """`python -m bench`'s in-process parts of a model (tools/<name>/bench.py; it may import the
    runtime stack: only bench loads it)."""

    batches: Callable[..., tuple[Callable[..., Any], list[tuple[Any, int]]]]
    """batches(artifacts, runtime, handler, payloads, batch) -> (run, [(feed, n), ...]): the bare
    runtime call and its inputs, prepared with the handler's own code."""
    stages: Callable[..., dict] | None = None
    """stages(artifacts, runtime, handler, payloads, batch, min_seconds) -> its inference stage
    taken apart, ms per request."""
    load: Callable[[Path, dict], Any] | None = None
    """load(artifacts, config) -> the model the handler-path timing runs (default: its MODEL.load)."""


@dataclass(frozen=True)
class Rehearsal:
    """`make rehearse`'s traffic of a model (tools/<name>/rehearsal.py): its streams through the
    balancer while replicas are killed and rolled; `--no-<name>-streams` leaves it out."""

    path: str
    """The request path its traffic uses (counted in each replica's access log)."""
    start: Callable[[str, str], Any]
    """start(http, token) -> a driver with `.stop()`, `.attempts` and `.streams`."""
    summarise: Callable[[list[dict], list[dict], list[dict], dict[str, int]], dict]
    """summarise(attempts, streams, events, access_logs) -> the summary the report reads."""
    problems: Callable[[dict], list[str]]
    """problems(summary) -> what failed (empty when the rehearsal holds)."""
    report: Callable[[dict], list[str]]
    """report(summary) -> markdown lines."""


@dataclass(frozen=True)
class Overload:
    """A model's overload case (tools/<name>/overload.py): `python -m reliability.overload --model
    <name>` and loadtests/overload.py."""

    before: Mapping[str, Any]
    """The overrides of the "before" case (what the project served before bounding the work)."""
    settings_shown: tuple[str, ...]
    """The handler settings the report quotes for each case."""
    small: Mapping[str, Any]
    """The short request: most of the users, and the probes after the load stops."""
    large: Callable[[dict], dict]
    """large(handler_settings) -> the largest valid request under them."""
    full_size_artifacts: Callable[[Path], Path]
    """full_size_artifacts(out) -> artifacts of the real architecture (what a batch costs)."""


@dataclass(frozen=True)
class Parts:
    """A model's tool parts but its samples: each a typed value of its own module (none where the
    model has no such part) and its training package's entry. Checked when built."""

    train: Callable[..., dict]
    """train(out, config="default", **opts) -> manifest: training/<name>/'s `train_model`."""
    cli: Cli | None = None
    bench: Bench | None = None
    rehearsal: Rehearsal | None = None
    overload: Overload | None = None

    def __post_init__(self) -> None:
        kinds = {"cli": Cli, "bench": Bench, "rehearsal": Rehearsal, "overload": Overload}
        for name, kind in kinds.items():
            value = getattr(self, name)
            if not (value is None or isinstance(value, kind)):
                raise TypeError(
                    f"{name} must be a tools.plugin.{kind.__name__} (its {name}.py's "
                    f"{name.upper()}), not {value!r}"
                )
        if not callable(self.train):
            raise TypeError(f"train must be its training package's train_model, not {self.train!r}")


@dataclass(frozen=True)
class Tools:
    """`TOOLS` in tools/<name>/__init__.py: its `SAMPLES` (light: the Makefile reads them) and
    `parts`, whose static imports of its other parts and its training package run when asked."""

    samples: Samples
    parts: Callable[[], Parts]

    def __post_init__(self) -> None:
        if not isinstance(self.samples, Samples):
            raise TypeError(f"TOOLS.samples must be a tools.plugin.Samples, not {self.samples!r}")
