"""The registry as the tools see it: each served model's spec (handlers/registry.py) plus its tool
parts in tools/<name>/ and its training package in training/<name>/.

`tools/<name>/samples.py` is light (no torch) and declares `SAMPLES`, a typed `tools.plugin.Samples`
(example bodies, load-test and bench payloads, train options, load weights, ...): `ToolSpec.samples()`
returns it, and mypy checks both sides. Optional modules of its own, each declaring one typed value
(tools/plugin.py) that `ToolSpec` returns: cli.py (`CLI`: `python -m clients` options and
requests), rehearsal.py (`REHEARSAL`: its traffic during `make rehearse`), overload.py
(`OVERLOAD`: its overload case), bench.py (`BENCH`: `python -m bench`'s bare-runtime feeds and
timings). docs/adding-a-model.md has each part in one line.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from handlers import registry as serving
from tools.plugin import Bench, Cli, Overload, Rehearsal, Samples

T = TypeVar("T")

TOOL_PARTS = ("samples", "cli", "client", "bench", "rehearsal", "overload", "explain_view")
"""The modules of tools/<name>/; any other part is a serving module of handlers/<name>/."""


@dataclass(frozen=True)
class ToolSpec(serving.ModelSpec):
    @property
    def training_package(self) -> str:
        return f"training.{self.name}"

    @property
    def folders(self) -> tuple[str, ...]:
        """The paths only this model's code lives in."""
        n = self.name
        return (*super().folders, f"tools/{n}/", f"training/{n}/")

    def module(self, part: str) -> ModuleType | None:
        """tools/<name>/<part>.py (a tool part) or handlers/<name>/<part>.py (a serving module), or
        None where the model has no such module."""
        package = "tools" if part in TOOL_PARTS else "handlers"
        name = f"{package}.{self.name}.{part}"
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            return None

    def samples(self) -> Samples:
        """The model's `SAMPLES` (tools/<name>/samples.py), or no hooks where it has none."""
        module = self.module("samples")
        if module is None:
            return Samples()
        return _declared(module, "SAMPLES", Samples)

    def cli(self) -> Cli | None:
        """The model's `CLI` (tools/<name>/cli.py), or None where it has no client options."""
        module = self.module("cli")
        return None if module is None else _declared(module, "CLI", Cli)

    def bench(self) -> Bench | None:
        """The model's `BENCH` (tools/<name>/bench.py; imports the runtime stack), or None where
        bench has no in-process parts of it."""
        module = self.module("bench")
        return None if module is None else _declared(module, "BENCH", Bench)

    def rehearsal(self) -> Rehearsal | None:
        """The model's `REHEARSAL` (tools/<name>/rehearsal.py), or None: no traffic of its own."""
        module = self.module("rehearsal")
        return None if module is None else _declared(module, "REHEARSAL", Rehearsal)

    def overload(self) -> Overload | None:
        """The model's `OVERLOAD` (tools/<name>/overload.py), or None: no overload case."""
        module = self.module("overload")
        return None if module is None else _declared(module, "OVERLOAD", Overload)

    def example(self) -> dict:
        return dict(self.samples().example)

    def train_args(self) -> list[str]:
        fn = self.samples().train_args
        return list(fn()) if fn else []

    def train(self, out: str | Path, config: str = "default", **opts) -> dict:
        """Train and export into `out` (parity-gated); returns the manifest."""
        package = importlib.import_module(self.training_package)
        return package.train(Path(out), config, **opts)


def _declared(module: ModuleType, name: str, kind: type[T]) -> T:
    value = getattr(module, name, None)
    if not isinstance(value, kind):
        raise TypeError(f"{module.__name__}.{name} is not a tools.plugin.{kind.__name__}")
    return value


MODELS: tuple[ToolSpec, ...] = tuple(ToolSpec(m.name, m.kits) for m in serving.MODELS)
names = serving.names


def get(name: str) -> ToolSpec:
    """The spec of a served name; a variant such as `<name>_onnx` maps to its family."""
    family = serving.get(name).name
    return next(m for m in MODELS if m.name == family)


def main(argv: list[str] | None = None) -> int:
    """python -m tools.registry names | train-args NAME | folders"""
    args = sys.argv[1:] if argv is None else argv
    if args == ["names"]:
        print(" ".join(names()))
    elif len(args) == 2 and args[0] == "train-args":
        print(" ".join(get(args[1]).train_args()))
    elif args == ["folders"]:
        print("\n".join(f for m in MODELS for f in m.folders))
    else:
        print(main.__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
