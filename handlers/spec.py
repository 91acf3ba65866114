"""A served model's one hook: `SPEC`, the `ModelSpec` its folder's `handlers/<name>/__init__.py`
exports, naming the real objects it is made of. Its TorchServe entry file
(handlers/<name>_handler.py) imports it; the registry (handlers/registry.py) reaches it by a
static import; the OIP server, scoring and the tools read it from there. A spec of a wrong kind
fails when its model's package is imported, saying which field is wrong."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from handlers.service import Model
from handlers.settings import ServingSettings
from handlers.tensors import Tensor


class TensorContract(Protocol):
    """A model's Open Inference Protocol tensors (served by oip/, oip/contract.py): a module of its
    kit (handlers/kits/<kit>/oip.py) or of its own folder."""

    @property
    def inputs(self) -> Callable[[Any], tuple[Tensor, ...]]:
        """settings -> the input tensors it reads (metadata lists them)"""

    @property
    def outputs(self) -> Callable[[Any], tuple[Tensor, ...]]:
        """settings -> the output tensors its answers carry"""

    @property
    def request_of(self) -> Callable[..., Any]:
        """(tensors, parameters, settings) -> its kit's typed request"""

    @property
    def outputs_of(self) -> Callable[..., Any]:
        """(typed answer, settings) -> its output tensors"""


CONTRACT_MEMBERS = ("inputs", "outputs", "request_of", "outputs_of")
"""The functions every tensor contract has (`TensorContract`), checked at import."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    """The served family's name: its folder, and its registry line (handlers/registry.py), which
    checks that the spec it loads is its own and on the kit it names."""
    model: type[Model]
    """Its part of the serving lifecycle: the `Model` of handlers/service.py (`load`, `parse`,
    `inference`, `reply`, ...), a class of handlers/<name>/model.py."""
    settings: type[ServingSettings]
    """The model-config's `handler:` block, parsed and validated once at load."""
    kit: ModuleType
    """The modality kit it is built on, handlers/kits/<kit>/ (its registry line names it too: the
    archive carries it)."""
    contract: TensorContract
    """Its Open Inference Protocol tensors."""

    @property
    def kit_name(self) -> str:
        return self.kit.__name__.rsplit(".", 1)[1]

    def __post_init__(self) -> None:
        where = f"handlers/{self.name}/__init__.py SPEC"
        if not (isinstance(self.model, type) and callable(getattr(self.model, "load", None))):
            raise TypeError(f"{where}.model must be a Model class with `load`, not {self.model!r}")
        if not (isinstance(self.settings, type) and issubclass(self.settings, ServingSettings)):
            raise TypeError(
                f"{where}.settings must be a ServingSettings class, not {self.settings!r}"
            )
        if not isinstance(self.kit, ModuleType):
            raise TypeError(f"{where}.kit must be a module, not {self.kit!r}")
        if self.kit.__name__.count(".") != 2 or not self.kit.__name__.startswith("handlers.kits."):
            raise TypeError(f"{where}.kit must be a kit, handlers.kits.<kit>, not {self.kit!r}")
        missing = [m for m in CONTRACT_MEMBERS if not callable(getattr(self.contract, m, None))]
        if missing:
            raise TypeError(f"{where}.contract has no {', '.join(missing)}")
