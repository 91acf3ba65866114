"""The registry as the tools see it: each served model's registry line (handlers/registry.py) plus
its tool parts, `TOOLS` in tools/<name>/__init__.py (a typed `tools.plugin.Tools`), reached by a
static import when asked for.

`TOOLS.samples` (tools/<name>/samples.py, light: the Makefile reads its train options) is a
`Samples` (example bodies, load-test and bench payloads, train options, load weights, ...);
`TOOLS.parts()` imports the others, each a typed value of its own module (tools/plugin.py): `cli`
(cli.py: `python -m clients` options and requests), `rehearsal` (rehearsal.py: its traffic during
`make rehearse`), `overload` (overload.py: its overload case), `bench` (bench.py: `python -m
bench`'s bare-runtime feeds and timings), and `train`, its training package's entry
(training/<name>/). mypy checks both sides. docs/adding-a-model.md has each part in one line.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from handlers import registry as serving
from tools.plugin import Bench, Cli, Overload, Rehearsal, Samples, Tools


@dataclass(frozen=True)
class ToolSpec(serving.Entry):
    load_tools: Callable[[], Tools]
    """Its `TOOLS`, by a static import of tools/<name>/ (its samples; the other parts when asked)."""

    @property
    def folders(self) -> tuple[str, ...]:
        """The paths only this model's code lives in."""
        n = self.name
        return (*super().folders, f"tools/{n}/", f"training/{n}/")

    def tools(self) -> Tools:
        return self.load_tools()

    def samples(self) -> Samples:
        return self.tools().samples

    def cli(self) -> Cli | None:
        """Its `python -m clients` options, or None where it has none."""
        return self.tools().parts().cli

    def bench(self) -> Bench | None:
        """Its bench parts (their calls import the runtime stack), or None where bench has no
        in-process parts of it."""
        return self.tools().parts().bench

    def rehearsal(self) -> Rehearsal | None:
        """Its traffic during `make rehearse`, or None: no traffic of its own."""
        return self.tools().parts().rehearsal

    def overload(self) -> Overload | None:
        """Its overload case, or None: no overload case."""
        return self.tools().parts().overload

    def example(self) -> dict:
        return dict(self.samples().example)

    def train_args(self) -> list[str]:
        fn = self.samples().train_args
        return list(fn()) if fn else []

    def train(self, out: str | Path, config: str = "default", **opts) -> dict:
        """Train and export into `out` (parity-gated); returns the manifest."""
        return self.tools().parts().train(Path(out), config, **opts)


def _sentiment() -> Tools:
    from tools.sentiment import TOOLS

    return TOOLS


def _frequency() -> Tools:
    from tools.frequency import TOOLS

    return TOOLS


def _digits() -> Tools:
    from tools.digits import TOOLS

    return TOOLS


def _tabular() -> Tools:
    from tools.tabular import TOOLS

    return TOOLS


TOOLS: dict[str, Callable[[], Tools]] = {
    "sentiment": _sentiment,
    "frequency": _frequency,
    "digits": _digits,
    "tabular": _tabular,
}
MODELS: tuple[ToolSpec, ...] = tuple(
    ToolSpec(m.name, m.kits, m.load, TOOLS[m.name]) for m in serving.MODELS
)
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
