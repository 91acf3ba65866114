"""Each model's tool hooks are one typed declaration (tools/plugin.Samples) the registry returns:
a misspelt hook fails (TypeError here, a mypy error in `make lint`) instead of reading as "this
model does not support it", and docs/adding-a-model.md lists every field."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tools.plugin import Samples
from tools.registry import MODELS

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("spec", MODELS, ids=lambda m: m.name)
def test_every_model_declares_its_hooks_as_one_typed_samples(spec):
    samples = spec.samples()
    assert isinstance(samples, Samples)
    assert samples.example and samples.payloads is not None and samples.bench_feed is not None
    for f in dataclasses.fields(Samples):
        value = getattr(samples, f.name)
        if f.name not in {"example", "bench_bodies", "load_weight", "load_cost", "state_key"}:
            assert value is None or callable(value), f.name


def test_a_misspelt_hook_is_an_error_not_an_absent_hook():
    with pytest.raises(TypeError, match="exampel"):
        Samples(exampel={"text": "hi"})  # type: ignore[call-arg]


def test_adding_a_model_lists_every_samples_field():
    text = (ROOT / "docs" / "adding-a-model.md").read_text()
    section = text.split("## Hooks in `tools/m/samples.py`", 1)[1].split("\n## ", 1)[0]
    missing = [f.name for f in dataclasses.fields(Samples) if f"`{f.name}" not in section]
    assert not missing, missing


def test_adding_a_model_lists_every_field_of_the_optional_modules():
    from tools.plugin import Bench, Cli, Overload, Rehearsal

    text = (ROOT / "docs" / "adding-a-model.md").read_text()
    section = text.split("## Optional modules", 1)[1].split("\n## ", 1)[0]
    for kind in (Cli, Bench, Rehearsal, Overload):
        missing = [f.name for f in dataclasses.fields(kind) if f"`{f.name}" not in section]
        assert not missing, (kind.__name__, missing)


@pytest.mark.parametrize("spec", MODELS, ids=lambda m: m.name)
def test_every_model_declares_its_client_and_bench_parts_typed(spec):
    from tools.plugin import Bench, Cli

    cli = spec.cli()
    assert isinstance(cli, Cli) and cli.arguments is not None and cli.request is not None
    bench = spec.bench()
    assert isinstance(bench, Bench) and callable(bench.batches)


def test_rehearsal_and_overload_parts_are_typed_declarations():
    """The models that have them declare them typed; a module without its declaration is an
    error, not an absent hook."""
    from tools.plugin import Overload, Parts, Rehearsal

    declared = {m.name: (m.rehearsal(), m.overload()) for m in MODELS}
    assert isinstance(declared["frequency"][0], Rehearsal)
    assert isinstance(declared["sentiment"][1], Overload)
    assert all(r is None or isinstance(r, Rehearsal) for r, _ in declared.values())
    assert all(o is None or isinstance(o, Overload) for _, o in declared.values())
    bare = {"SMALL": {"text": "old style"}}  # an overload.py's names, without its declaration
    with pytest.raises(TypeError, match="OVERLOAD"):
        Parts(dict, overload=bare)  # type: ignore[arg-type]
