"""The registry of served models: one line per model, its spec reached by a static import.

A model named `m` serves from these paths, and nothing else in handlers/ names it:

    handlers/m_handler.py        the TorchServe handler (the .mar's entry point), over its SPEC
    handlers/m/__init__.py       SPEC: its `ModelSpec` (handlers/spec.py), the real objects it is
                                 made of: its model class (its part of the serving lifecycle,
                                 handlers/service.py), settings class, kit, tensor contract
    handlers/m/                  its other serving modules: model-config.yaml, model.py, settings.py
    handlers/kits/<kit>/         the modality kits it is built on (`kits=`), shared with the other
                                 models of its modality

Its tool parts (samples, CLI, bench, rehearsal and overload traffic, views) live in tools/m/ and
are found through tools/registry.py, which extends these specs; its training package is
training/m/. docs/adding-a-model.md has each part in one line.

This module imports nothing heavy and no model when it is imported: the Makefile (`python -m
handlers.registry names`), the pod's init container and a worker read it, and a worker's archive
carries only its own model's folder, so a model's package is imported only when its spec is asked
for (`Entry.spec`, each line's loader one static import). Adding a model is its folders, its
loader and one line in MODELS.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from handlers.spec import ModelSpec

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Entry:
    name: str
    """The served name: /predictions/<name>, <name>.mar, S3 and MLflow model name."""
    kits: tuple[str, ...]
    """The modality kits its serving code is built on (handlers/kits/<kit>/): its archive carries
    them, and the kit's shared tests run over it (tests/unit/test_image_kit.py). Its spec's `kit`
    is checked against it."""
    load: Callable[[], ModelSpec]
    """Its spec, by a static import of its package (imports the model's runtime stack)."""

    @property
    def model_config(self) -> Path:
        return ROOT / "handlers" / self.name / "model-config.yaml"

    @property
    def folders(self) -> tuple[str, ...]:
        """The paths only this model's serving code lives in (what its archive carries of it)."""
        n = self.name
        return (f"handlers/{n}/", f"handlers/{n}_handler.py")

    @property
    def kit_paths(self) -> tuple[str, ...]:
        """The kits' code its archive carries besides its own folder (none without kits)."""
        if not self.kits:
            return ()
        return ("handlers/kits/__init__.py", *(f"handlers/kits/{k}/" for k in self.kits))

    def spec(self) -> ModelSpec:
        """Its SPEC (handlers/<name>/__init__.py), checked to be its own and on the kits this line
        names; ModuleNotFoundError where its folder is absent (a worker's archive carries only
        its own)."""
        spec = self.load()
        if spec.name != self.name or (spec.kit_name,) != self.kits:
            raise TypeError(
                f"handlers/{self.name}/__init__.py SPEC is {spec.name!r} on the kit "
                f"{spec.kit_name!r}; its registry line is {self.name!r} on {self.kits}"
            )
        return spec


def _sentiment() -> ModelSpec:
    from handlers.sentiment import SPEC

    return SPEC


def _frequency() -> ModelSpec:
    from handlers.frequency import SPEC

    return SPEC


def _digits() -> ModelSpec:
    from handlers.digits import SPEC

    return SPEC


def _tabular() -> ModelSpec:
    from handlers.tabular import SPEC

    return SPEC


MODELS: tuple[Entry, ...] = (
    Entry("sentiment", ("text",), _sentiment),
    Entry("frequency", ("signal",), _frequency),
    Entry("digits", ("image",), _digits),
    Entry("tabular", ("tabular",), _tabular),
)


def names() -> list[str]:
    return [m.name for m in MODELS]


def get(name: str) -> Entry:
    """The spec of a served name; a variant such as `<name>_onnx` maps to its family."""
    for spec in sorted(MODELS, key=lambda m: -len(m.name)):
        if name == spec.name or name.startswith(spec.name + "_"):
            return spec
    raise KeyError(f"no registered model {name!r}: known {', '.join(names())}")


def main(argv: list[str] | None = None) -> int:
    """python -m handlers.registry names | folders | kits MODEL"""
    args = sys.argv[1:] if argv is None else argv
    if args == ["names"]:
        print(" ".join(names()))
    elif args == ["folders"]:
        print("\n".join(f for m in MODELS for f in m.folders))
    elif len(args) == 2 and args[0] == "kits":
        print(" ".join(get(args[1]).kit_paths))
    else:
        print(main.__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
