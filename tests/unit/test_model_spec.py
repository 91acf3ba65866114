"""Each model's one hook, `SPEC` (handlers/spec.py): the real objects it is made of, checked when
its package is imported; its handler file and its registry line reach it by static imports, and
every serving module is reached by an import a reader (and mypy, and import-linter) can follow."""

from __future__ import annotations

import dataclasses
import importlib
import re
from pathlib import Path

import grimp
import pytest

from handlers import registry
from handlers.settings import ServingSettings
from handlers.spec import ModelSpec

ROOT = Path(__file__).resolve().parents[2]
ROOTS = ("handlers", "oip", "scoring", "tools", "training", "bench", "clients", "deploy",
         "rehearsal", "reliability", "loadtests")  # fmt: skip
"""The repository's code but its tests: what a serving module must be reached from."""


@pytest.mark.parametrize("name", registry.names())
def test_each_registry_line_loads_its_own_spec_and_its_handler_serves_it(name):
    entry = registry.get(name)
    spec = entry.spec()
    assert isinstance(spec, ModelSpec) and spec.name == name
    assert (spec.kit_name,) == entry.kits
    assert issubclass(spec.settings, ServingSettings)
    assert spec.model.__module__ == f"handlers.{name}.model"
    handler = importlib.import_module(f"handlers.{name}_handler")
    assert [
        c.spec for c in vars(handler).values() if isinstance(c, type) and "spec" in vars(c)
    ] == [spec]


def fields(name: str = "digits") -> dict:
    spec = registry.get(name).spec()
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("model", "handlers.digits.model.DigitsModel", "SPEC.model must be a Model class"),
        ("settings", dict, "SPEC.settings must be a ServingSettings class"),
        ("kit", "image", "SPEC.kit must be a module"),
        ("kit", importlib.import_module("handlers.kits.image.decode"), "SPEC.kit must be a kit"),
        ("contract", importlib.import_module("handlers.kits.image"), "SPEC.contract has no inputs"),
    ],
)
def test_a_spec_of_a_wrong_kind_fails_when_built_saying_which_field(field, value, said):
    with pytest.raises(TypeError, match=re.escape(said)):
        ModelSpec(**fields() | {field: value})


def test_a_registry_line_refuses_a_spec_that_is_not_its_own():
    digits = registry.get("digits")
    with pytest.raises(TypeError, match="its registry line is 'digits'"):
        registry.Entry("digits", ("text",), digits.load).spec()
    with pytest.raises(TypeError, match="SPEC is 'digits'"):
        registry.Entry("tabular", ("image",), digits.load).spec()


def test_every_serving_module_is_reached_by_a_static_import():
    """Guard: handlers/sentiment/oip.py, handlers/digits/codec.py and tabular's codec.py were
    reached by no import (the registry found modules by import strings). Entry files are named by
    the archive's manifest, packages by their modules."""
    graph = grimp.build_graph(*ROOTS, cache_dir=None)
    entries = {f"handlers.{m}_handler" for m in registry.names()}
    packages = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts[:-1])
        for p in (ROOT / "handlers").rglob("__init__.py")
    }
    unreached = [
        m
        for m in sorted(graph.modules)
        if m.startswith("handlers")
        and m not in entries | packages
        and not graph.find_modules_that_directly_import(m)
    ]
    assert unreached == []


def test_no_import_strings_in_the_serving_code_or_the_tools_registry():
    sources = [*ROOT.glob("handlers/**/*.py"), *ROOT.glob("oip/*.py"), *ROOT.glob("scoring/*.py")]
    hooks = [
        str(p.relative_to(ROOT))
        for p in sources
        if re.search(r"import_module\(|__import__\(", p.read_text())
    ]
    assert hooks == []
