"""The text kit's settings, one object (`TextSettings`): the model-config's `handler:` block (how
to serve it; the knobs every model has are declared in handlers/settings.py) bound at load to the
artifact manifest's `handler` block (what the export is, `TextExport`). A model of the kit
subclasses `TextSettings` (its own knobs, if any) and loads it with `TextSettings.load`.

A bad archive raises `ArchiveError` here, so TorchServe fails the worker at load time instead of
answering the first request with a 500.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal, Self

from pydantic import Field

from handlers.errors import ArchiveError
from handlers.manifest import (
    handler_block,
    manifest_version,
    minimum_int,
    names,
    positive_int,
    reject_unknown_export,
    require,
    text,
)
from handlers.settings import PositiveInt, ServingSettings


class TextSettings(ServingSettings):
    """The model-config's `handler:` block: how to serve the export, bound to it at load (`load`).
    These defaults are the only ones; a model's model-config.yaml restates the limits it ships
    with (handlers/sentiment/model-config.yaml: equal to them)."""

    texts_alone: bool | None = None
    """Run each text of a batch alone, at its own length, instead of one padded batch. None: alone
    on a CPU (no padding to the longest neighbour: faster on mixed-length reviews,
    docs/performance.md) and always for onnx-int8 (its answers then never depend on the
    batch); padded batches on an accelerator, where batching is what makes it fast."""
    max_length: PositiveInt | None = None
    """Tokens per text after truncation; None: the exported max_length (never more). Bound, it
    is the served length."""
    max_text_bytes: PositiveInt = 8192
    """Largest UTF-8 text accepted per item; longer ones are refused with 400."""
    max_texts: PositiveInt = 16
    """Most texts in one {"texts": [...]} request."""
    max_batch_tokens: PositiveInt = 5120
    """Work budget of one batch, in tokens (one largest request, 16 x 256, + 1024 for short ones):
    requests past it get a fast 503 with Retry-After (handlers/budget.py). The first request of a
    batch always runs."""
    self_check_atol: float = 1e-3
    """At load, the head over the graph's features must reproduce the graph's logits within this."""
    fp16: bool = False
    """TorchScript under float16 autocast: a GPU option, gated at load against float32."""
    fp16_atol: float = 0.05
    """fp16 gate: max |logit| and |feature| difference from float32 on the load-time probe texts
    (and the same predicted label); the head's self-check is widened to this too."""
    explain_method: Literal["hierarchical", "ablation", "shapley"] = "hierarchical"
    """Captum method of /explanations: hierarchical occlusion (word groups, then the words of the
    groups that matter, within `explain_passes`), leave-one-word-out (a pass per word) or Shapley
    sampling (docs/explanations.md compares them on deletion curves)."""
    explain_samples: PositiveInt = 4
    """Shapley sampling only: permutations drawn (each costs one pass per word)."""
    explain_passes: Annotated[int, Field(ge=4)] = 48
    """hierarchical only: forward passes per text, whatever its length (a shorter text takes one
    per word, plus one); docs/explanations.md gives its cost and its deletion curves."""
    max_explain_tokens: PositiveInt = 12288
    """Cost limit of one explanation request, in token-passes (per text: passes x its tokens):
    past it the request is refused with 400 too_large before anything runs. 12,288 = one text of
    a full window (256 tokens) x `explain_passes` (48): every text /predictions takes is
    explained alone; a {"texts": [...]} request up to that sum."""
    max_batch_explain_tokens: PositiveInt = 12288
    """Explanation work per batch, token-passes: requests past it get 503 + Retry-After, so
    predictions queued behind explanations wait at most one explanation's worth more
    (docs/explanations.md)."""

    @property
    def export(self) -> TextExport:
        """What the export is (the manifest's `handler` block), bound at load (`load`)."""
        return self._export

    @classmethod
    def load(cls, manifest: dict, config: dict | None, model: str) -> Self:
        """manifest.json contents + the model-config's `handler:` block → settings, or
        ArchiveError naming what is wrong."""
        export = TextExport.from_block(handler_block(manifest), model)
        settings = cls.parse(config, model)
        max_length = settings.max_length or export.max_length
        if max_length > export.max_length:
            raise ArchiveError(
                f"handler.max_length {max_length} exceeds the exported {export.max_length}"
            )
        return settings.bind(export, manifest_version(manifest), max_length=max_length)


@dataclass(frozen=True)
class TextExport:
    """The manifest's `handler` block: what training exported. Training builds one and writes
    `to_block()`; serving reads it with `from_block`, so each key is named here and nowhere else."""

    input_names: tuple[str, ...]
    """Graph inputs, in call order: (input_ids, attention_mask)."""
    output_names: tuple[str, ...]
    """Graph outputs: (logits, features); features feed the stochastic head."""
    labels: tuple[str, ...]
    """Class names by logit index."""
    max_length: int
    """Tokens per text after truncation (special tokens included), as trained and exported."""
    temperature: float = 1.0
    """Calibration temperature fitted on the validation split."""
    pad_token_id: int = 0
    truncation: str | bool | None = None
    """How a long text was cut in training: "head+tail" (with head_tokens, what training writes),
    "left" (keep the end), or "right"/None (keep the start)."""
    head_tokens: int | None = None
    """head+tail only: content tokens kept from the start; the rest of the budget from the end."""
    feature_dim: int | None = None
    """Width of the graph's features output, which the head must take."""
    tokenizer: str = "tokenizer/tokenizer.json"
    """The tokenizer.json, relative to the artifact directory."""
    head: str = "head.npz"
    """The stochastic head's weights, relative to the artifact directory."""

    def kept_head(self) -> int:
        """Content tokens a too-long text keeps from its start (the rest from its end)."""
        return _head_tokens(self.truncation, self.head_tokens, self.max_length)

    def to_block(self) -> dict[str, Any]:
        """The JSON block (optional values that are None are left out)."""
        block = {f.name: getattr(self, f.name) for f in fields(self)}
        block = {k: list(v) if isinstance(v, tuple) else v for k, v in block.items()}
        return {k: v for k, v in block.items() if v is not None}

    @classmethod
    def from_block(cls, block: dict, model: str = "text") -> TextExport:
        """Parse and check the manifest block; a missing, unknown or bad key raises ArchiveError
        naming it."""
        reject_unknown_export(block, (f.name for f in fields(cls)), model)
        where = "manifest handler block"
        labels = names(require(block, "labels", where), "manifest labels")
        if len(labels) < 2:
            raise ArchiveError(f"need at least two labels, got {labels}")
        temperature = block.get("temperature", 1.0)
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise ArchiveError(f"manifest temperature must be a number, not {temperature!r}")
        if not temperature > 0:
            raise ArchiveError(f"temperature must be positive, not {temperature}")
        feature_dim = block.get("feature_dim")
        export = cls(
            input_names=names(require(block, "input_names", where), "manifest input_names"),
            output_names=names(require(block, "output_names", where), "manifest output_names"),
            labels=labels,
            max_length=positive_int(require(block, "max_length", where), "manifest max_length"),
            temperature=float(temperature),
            pad_token_id=minimum_int(block.get("pad_token_id", 0), "manifest pad_token_id"),
            truncation=block.get("truncation"),
            head_tokens=block.get("head_tokens"),
            feature_dim=None
            if feature_dim is None
            else positive_int(feature_dim, "manifest feature_dim"),
            tokenizer=text(block.get("tokenizer", cls.tokenizer), "manifest tokenizer"),
            head=text(block.get("head", cls.head), "manifest head"),
        )
        if len(export.input_names) < 2 or len(export.output_names) < 2:
            raise ArchiveError(
                "manifest input_names and output_names need two names each: "
                "(input_ids, attention_mask) and (logits, features)"
            )
        export.kept_head()  # an unknown truncation rule fails here, at load
        return export


HEAD_TAIL = "head+tail"
"""The truncation training writes, with `head_tokens` beside it."""


def _head_tokens(rule: Any, head: Any, max_length: int) -> int:
    """The manifest's truncation → head tokens: "head+tail" with `head_tokens` (what training
    writes), "left" (keep the end), or "right"/true/absent (keep the start)."""
    if rule == HEAD_TAIL:
        if isinstance(head, bool) or not isinstance(head, int) or head < 0:
            raise ArchiveError(f"head_tokens must be a non-negative integer, not {head!r}")
        return head
    if head is not None:
        raise ArchiveError(f"head_tokens is set but truncation is {rule!r}, not {HEAD_TAIL!r}")
    if isinstance(rule, str) and rule.lower() == "left":
        return 0
    if rule in (None, True) or (
        isinstance(rule, str) and rule.lower() in {"right", "longest_first", "only_first"}
    ):
        return max_length
    raise ArchiveError(f"manifest truncation {rule!r} is not one this handler knows")
