"""The registry of served models: one line per model, everything else found by convention.

A model named `m` owns these folders, and nothing outside them names it:

    handlers/m_handler.py        the TorchServe handler (the .mar's entry point)
    handlers/m/                  its plain modules: model-config.yaml, model.py (MODEL: its part of
                                 the serving lifecycle, handlers/service.py), codec.py (the wire
                                 contract, both directions), samples.py (the hooks below)
    training/m/                  its training package: CONFIGS {"tiny", "default"} and
                                 train(out, config="default", **opts) -> manifest

`handlers/m/samples.py` is light (no torch) and may define, all optional:

    EXAMPLE: dict                one valid JSON body (probes, fuzzing, neighbours)
    binary_example() -> (bytes, content_type, headers) | None   a valid non-JSON body
    payloads(seed) -> () -> dict load-test / bench request bodies, deterministic per seed
    train_args() -> list[str]    extra `python -m training.m` options `make train` passes
    LOAD_COST: int               relative cost of serving it (the cheapest is used for fault tests)
    STATE_KEY: str               the variable naming its signing-key file (pods mount the Secret there)
    bench_feed(n), BENCH_BODIES, bench_arguments(group), fp16_atol()   bench's per-model parts
    light_request(i) -> dict     a small body the rehearsal's Locust users send

and, also optional, modules of its own that shared tools look for (`ModelSpec.module`): cli.py
(`python -m clients` options and requests), rehearsal.py (its traffic during `make rehearse`),
overload.py (its overload case), bench.py (`python -m bench`'s bare-runtime feeds and timings).
docs/adding-a-model.md has each hook in one line.

This module imports nothing heavy: clients, the Makefile (`python -m handlers.registry names`) and
the pod's init container read it. Adding a model is its folders plus one line in MODELS.
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

    @property
    def handler(self) -> str:
        return f"handlers/{self.name}_handler.py"

    @property
    def model_config(self) -> Path:
        return ROOT / "handlers" / self.name / "model-config.yaml"

    @property
    def training_package(self) -> str:
        return f"training.{self.name}"

    @property
    def folders(self) -> tuple[str, ...]:
        """The paths only this model's code lives in."""
        n = self.name
        return (f"handlers/{n}/", f"handlers/{n}_handler.py", f"training/{n}/")

    def module(self, part: str) -> ModuleType | None:
        """handlers/<name>/<part>.py, or None where the model has no such module."""
        try:
            return importlib.import_module(f"handlers.{self.name}.{part}")
        except ModuleNotFoundError as err:
            if err.name != f"handlers.{self.name}.{part}":
                raise
            return None

    def samples(self) -> ModuleType | None:
        """handlers/<name>/samples.py, or None where the model defines no hooks."""
        return self.module("samples")

    def hook(self, attr: str, default: Any = None) -> Any:
        return getattr(self.samples(), attr, default)

    def model_class(self) -> Any:
        """The model's part of the serving lifecycle: `MODEL` in handlers/<name>/model.py (the
        `Model` protocol of handlers/service.py). Imports the model's runtime stack."""
        return importlib.import_module(f"handlers.{self.name}.model").MODEL

    def codec(self) -> ModuleType:
        return importlib.import_module(f"handlers.{self.name}.codec")

    def example(self) -> dict:
        return dict(self.hook("EXAMPLE", {}))

    def train_args(self) -> list[str]:
        fn = self.hook("train_args")
        return list(fn()) if fn else []

    def train(self, out: str | Path, config: str = "default", **opts) -> dict:
        """Train and export into `out` (parity-gated); returns the manifest."""
        package = importlib.import_module(self.training_package)
        return package.train(Path(out), config, **opts)


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("sentiment"),
    ModelSpec("frequency"),
    ModelSpec("digits"),
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
    """python -m handlers.registry names | train-args NAME | folders"""
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
