"""The sentiment handler's settings, parsed once at load from the artifact manifest's `handler`
block (what the export is) and the model-config's `handler:` block (how to serve it).

A bad archive raises `ArchiveError` here, so TorchServe fails the worker at load time instead of
answering the first request with a 500.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers.errors import ArchiveError
from handlers.manifest import handler_block, positive_int, reject_unknown, require
from handlers.runtime import RUNTIME_FILES

SERVING_KEYS = frozenset(
    {
        "runtime",
        "threads",
        "max_length",
        "mc_samples",
        "seed",
        "max_text_bytes",
        "max_texts",
        "max_batch_tokens",
        "self_check_atol",
        "fp16",
        "fp16_atol",
        "intra_op_spinning",
    }
)
"""The knobs model-config.yaml's `handler:` block may set."""


@dataclass(frozen=True)
class SentimentSettings:
    input_names: tuple[str, ...]
    """Graph inputs, in call order: (input_ids, attention_mask)."""
    output_names: tuple[str, ...]
    """Graph outputs: (logits, features); features feed the stochastic head."""
    labels: tuple[str, ...]
    """Class names by logit index."""
    temperature: float
    """Calibration temperature fitted on the validation split."""
    max_length: int
    """Tokens per text after truncation (special tokens included)."""
    pad_token_id: int
    head_tokens: int
    """When a text is too long: content tokens kept from its start; the rest of the budget is
    filled from its end (head+tail, as in training). max_length keeps the start only."""
    version: str
    """The artifact version from the manifest, reported in every response."""
    tokenizer_file: str = "tokenizer/tokenizer.json"
    """The tokenizer.json, relative to the archive (manifest `tokenizer`)."""
    head_file: str = "head.npz"
    """The stochastic head's weights (manifest `head`)."""
    feature_dim: int | None = None
    """Width of the graph's features output, which the head must take (manifest `feature_dim`)."""
    runtime: str = "onnx"
    """onnx, onnx-int8 (the export's gated model.int8.onnx) or torchscript."""
    threads: int | None = None
    """Intra-op threads of the runtime; None keeps the runtime's default."""
    mc_samples: int = 16
    """MC-dropout samples of the head (the head is tiny: cost grows with this, not the encoder)."""
    seed: int = 0
    """Seed of the dropout masks, drawn once at load."""
    max_text_bytes: int = 8192
    """Largest UTF-8 text accepted per item; longer ones are refused with 400."""
    max_texts: int = 32
    """Most texts in one {"texts": [...]} request."""
    max_batch_tokens: int = 8192
    """Work budget of one batch, in tokens: requests past it get a fast 503 with Retry-After
    (handlers/budget.py). The first request of a batch always runs."""
    self_check_atol: float = 1e-3
    """At load, the head over the graph's features must reproduce the graph's logits within this."""
    fp16: bool = False
    """TorchScript under float16 autocast: a GPU option, gated at load against float32."""
    fp16_atol: float = 0.05
    """fp16 gate: max |logit| and |feature| difference from float32 on the load-time probe texts
    (and the same predicted label); the head's self-check is widened to this too."""
    intra_op_spinning: bool = False
    """ONNX Runtime intra-op threads busy-wait between ops when true (ORT's own default). Off:
    on shared cores the spinning threads compete with TorchServe's frontend."""


HEAD_TAIL = "head+tail"
"""The truncation training writes, with `head_tokens` beside it."""


def _head_tokens(block: dict, max_length: int) -> int:
    """The manifest's truncation → head tokens: "head+tail" with `head_tokens` (what training
    writes), "left" (keep the end), or "right"/true/absent (keep the start)."""
    rule = block.get("truncation")
    head = block.get("head_tokens")
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


def parse_settings(manifest: dict, config: dict | None) -> SentimentSettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    block = handler_block(manifest)
    serve = dict(config or {})
    where = "manifest handler block"
    exported_max = positive_int(require(block, "max_length", where), "manifest max_length")
    max_length = positive_int(serve.pop("max_length", None) or exported_max, "handler.max_length")
    if max_length > exported_max:
        raise ArchiveError(f"handler.max_length {max_length} exceeds the exported {exported_max}")
    labels = tuple(str(x) for x in require(block, "labels", where))
    if len(labels) < 2:
        raise ArchiveError(f"need at least two labels, got {labels}")
    temperature = float(block.get("temperature", 1.0))
    if not temperature > 0:
        raise ArchiveError(f"temperature must be positive, not {temperature}")
    runtime = str(serve.pop("runtime", "onnx"))
    if runtime not in RUNTIME_FILES:
        raise ArchiveError(
            f"handler.runtime must be one of {sorted(RUNTIME_FILES)}, not {runtime!r}"
        )
    threads = serve.pop("threads", None)
    reject_unknown(serve, SERVING_KEYS - {"runtime", "threads", "max_length"}, "sentiment")
    for key in ("fp16", "intra_op_spinning"):
        if key in serve and not isinstance(serve[key], bool):
            raise ArchiveError(f"handler.{key} must be true or false, not {serve[key]!r}")
    for key in ("mc_samples", "max_text_bytes", "max_texts", "max_batch_tokens"):
        if key in serve:
            positive_int(serve[key], f"handler.{key}")
    return SentimentSettings(
        input_names=tuple(require(block, "input_names", where)),
        output_names=tuple(require(block, "output_names", where)),
        labels=labels,
        temperature=temperature,
        max_length=max_length,
        pad_token_id=int(block.get("pad_token_id", 0)),
        head_tokens=_head_tokens(block, exported_max),
        version=str(manifest.get("version", "unknown")),
        tokenizer_file=str(block.get("tokenizer", "tokenizer/tokenizer.json")),
        head_file=str(block.get("head", "head.npz")),
        feature_dim=positive_int(block["feature_dim"], "manifest feature_dim")
        if "feature_dim" in block
        else None,
        runtime=runtime,
        threads=positive_int(threads, "handler.threads") if threads else None,
        **serve,
    )
