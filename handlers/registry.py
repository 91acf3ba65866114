"""The registry of served models: one line per model, everything else found by convention.

A model named `m` serves from these paths, and nothing else in handlers/ names it:

    handlers/m_handler.py        the TorchServe handler (the .mar's entry point)
    handlers/m/                  its serving modules: model-config.yaml, model.py (MODEL: its part of
                                 the serving lifecycle, handlers/service.py), codec.py (the wire
                                 contract, both directions), settings.py, ...
    handlers/kits/<kit>/         the modality kits it is built on (`kits=`), shared with the other
                                 models of its modality

Its tool parts (samples, CLI, bench, rehearsal and overload traffic, views) live in tools/m/ and
are found through tools/registry.py, which extends these specs; its training package is
training/m/. docs/adding-a-model.md has each part in one line.

This module imports nothing heavy and no model: the Makefile (`python -m handlers.registry
names`), the pod's init container and a worker read it, and a worker's archive carries only its
own model's folder, so a model's modules are imported only when asked for (`model_class`, `codec`).
Adding a model is its folders plus one line in MODELS.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ModelSpec:
    name: str
    """The served name: /predictions/<name>, <name>.mar, S3 and MLflow model name."""
    kits: tuple[str, ...] = ()
    """The modality kits its serving code is built on (handlers/kits/<kit>/): its archive carries
    them, and the kit's shared tests run over it (tests/unit/test_image_kit.py)."""

    @property
    def handler(self) -> str:
        return f"handlers/{self.name}_handler.py"

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

    def model_class(self) -> Any:
        """The model's part of the serving lifecycle: `MODEL` in handlers/<name>/model.py (the
        `Model` protocol of handlers/service.py). Imports the model's runtime stack."""
        return importlib.import_module(f"handlers.{self.name}.model").MODEL

    def codec(self) -> ModuleType:
        return importlib.import_module(f"handlers.{self.name}.codec")


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("sentiment", kits=("text",)),
    ModelSpec("frequency", kits=("signal",)),
    ModelSpec("digits", kits=("image",)),
    ModelSpec("tabular", kits=("tabular",)),
)


def names() -> list[str]:
    return [m.name for m in MODELS]


def get(name: str) -> ModelSpec:
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
