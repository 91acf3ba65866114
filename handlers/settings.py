"""What every model's serving settings share: the model-config.yaml `handler:` block as a strict,
declarative pydantic model, one per model (handlers/<name>/settings.py), and the one settings
object a model runs with: its knobs, with the export it serves (`export`, the manifest's `handler`
block) and the artifact `version` bound to it at load (`bind`). Every knob is read one way,
`settings.<knob>`; the knobs every model has (runtime, threads, share_cores, intra_op_spinning,
mc_samples, seed, explain_share) are declared here once, and a model's class adds only its own.

Strict: an unknown key (a typo, a retired knob) and a value of the wrong type (`seed: "abc"`,
`fp16_atol: wide`, `fp16: "yes"`) fail the load with an `ArchiveError` naming the key; nothing is
coerced. The field defaults are the one source of defaults; an archive's model-config overrides
them. TorchServe's own handler keys (`profile`, read by ts/handler_utils/timer.py) are tolerated.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from handlers.errors import ArchiveError

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class ServingSettings(BaseModel):
    """Base of a model's settings: its `handler:` block, then `bind` adds the export and version."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True
    )
    profile: bool = False
    """TorchServe's own key: log the handler's stage times (read by TorchServe's `timed`
    decorator, ts/handler_utils/timer.py, not by this project's handlers)."""
    share_cores: bool = False
    """The model's workers on one host share `threads` cores (handlers/runtime.CoreSlots, ONNX
    Runtime on the CPU): a worker runs on all of them while the others are idle and on one
    beside them under load, so a lone request gets every core and a busy replica runs its
    workers side by side. Each worker opens its graph twice (all cores, one core). TorchScript on
    the CPU, whose threads are the process's, then runs each worker on one thread."""
    explain_share: Annotated[float, Field(gt=0, le=1)] = 0.25
    """Most of a worker's time /explanations may take (over the last 10 s): past it they get a
    503 + Retry-After without running, so predictions keep at least the rest (handlers/explain.py)."""
    runtime: Literal["onnx", "torchscript"] = "onnx"
    """onnx or torchscript: which exported file the handler runs."""
    threads: PositiveInt | None = None
    """Intra-op threads of the runtime (None: the library's default)."""
    intra_op_spinning: bool = False
    """ONNX Runtime intra-op threads busy-wait between ops when true (ORT's own default). Off:
    on shared cores the spinning threads compete with TorchServe's frontend."""
    mc_samples: PositiveInt = 16
    """MC-dropout samples of the head (dropout -> linear over the graph's features)."""
    seed: NonNegativeInt = 0
    """Seed of the dropout masks, drawn once at load: an answer does not depend on its batch."""

    _export: Any = PrivateAttr(default=None)
    _version: str = PrivateAttr(default="")

    @property
    def version(self) -> str:
        """The artifact version (the manifest's), reported in every answer; "" before `bind`."""
        return self._version

    def bind(self, export: Any, version: str, **resolved: Any) -> Self:
        """These knobs with the export they serve and its version; `resolved`: knobs whose value
        comes from the export when the config leaves them unset (e.g. a window's hop)."""
        out = self.model_copy(update=resolved)
        out._export, out._version = export, version
        return out

    @classmethod
    def parse(cls, config: dict | None, model: str) -> Self:
        """The `handler:` block → settings, or ArchiveError naming each bad or unknown key."""
        try:
            return cls.model_validate(dict(config or {}))
        except ValidationError as e:
            raise ArchiveError(cls._explain(e, model)) from None

    @classmethod
    def _explain(cls, error: ValidationError, model: str) -> str:
        known = sorted(f.alias or n for n, f in cls.model_fields.items())
        errors = error.errors()
        unknown = [str(e["loc"][0]) for e in errors if e["type"] == "extra_forbidden"]
        problems = [_problem(e) for e in errors if e["type"] != "extra_forbidden"]
        if unknown:
            problems.insert(
                0,
                f"unknown {model} handler settings: {', '.join(unknown)} "
                f"(model-config.yaml handler: knows {', '.join(known)})",
            )
        return "; ".join(problems)


def _problem(e: Any) -> str:
    key = "handler." + ".".join(str(p) for p in e["loc"] if not isinstance(p, int))
    ctx, value = e.get("ctx") or {}, e["input"]
    if e["type"] == "greater_than_equal" and ctx.get("ge") == 1:
        return f"{key} must be a positive integer, not {value!r}"
    if e["type"] == "greater_than_equal":
        return f"{key} must be an integer >= {ctx.get('ge')}, not {value!r}"
    if e["type"] == "bool_type":
        return f"{key} must be true or false, not {value!r}"
    if e["type"] == "literal_error":
        return f"{key} must be one of {ctx.get('expected')}, not {value!r}"
    return f"{key}: {e['msg'].lower()}, not {value!r}"
