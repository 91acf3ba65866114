"""The most expensive requests each model's limits allow, and the first ones past them.

Built per modality kit (`KITS`: image, text, signal, tabular) and chosen by the kits a model names
in its registry line, so a model gets its worst cases by naming its kit. Read from the
model-config's `handler:` block (the archive's limits), so a changed limit changes the worst case
tested: the largest image dimensions in the fewest bytes (one-colour lossless WebP, grey PNG, JPEG
at the pixel limits), the longest texts, the longest signals at every frequency, the most records,
and the explanation of each at its cost limit. `expect` is what each may get: an answer or a
batch's 503 for the allowed ones, the request's own 400 `too_large` for the ones past a limit.
"""

from __future__ import annotations

import base64
import io
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from handlers.manifest import read_manifest
from tools import registry

ROOT = Path(__file__).resolve().parents[1]

ALLOWED = frozenset({200, 503})
"""An allowed request is answered, or refused for its batch's budget (503 overloaded)."""
OVER = frozenset({400})
"""A request past a per-request limit is refused alone, before its work (400 too_large)."""
OVER_EXPLAIN = frozenset({400, 503})
"""An explanation past its limit: 400 too_large, or 503 when explanations have used their share
of the worker (handlers/explain.py), which the server checks first; neither runs it."""


@dataclass(frozen=True)
class Costly:
    label: str
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    explain: bool = False
    expect: frozenset[int] = ALLOWED

    @property
    def path(self) -> str:
        return "explanations" if self.explain else "predictions"

    def request_headers(self) -> dict[str, str]:
        return {"Content-Type": self.content_type} | self.headers

    def __repr__(self) -> str:
        kind = "explain" if self.explain else "predict"
        return f"Costly({self.label}, {kind}, {len(self.body)} bytes)"


def _json(value) -> bytes:
    return json.dumps(value).encode()


def _image(fmt: str, side: int, mode: str, **save) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new(mode, (side, side), 200 if mode == "L" else (200, 180, 160)).save(buf, fmt, **save)
    return buf.getvalue()


@dataclass(frozen=True)
class Known:
    """What a kit's worst cases read of a model besides its limits."""

    example: Mapping[str, Any]
    """One valid JSON body (tools/<model>/samples.py's `example`)."""
    export: Mapping[str, Any]
    """Its manifest's `handler` block, or where no manifest is read its samples' stand-in
    (`Samples.export`)."""
    explain_cost: Callable[[str], int] | None = None
    """A text's explanation cost (the served model's), where the caller has it."""


def image(config: dict, known: Known) -> list[Costly]:
    """Images at max_image_pixels, as many per request as max_request_pixels allows; the 18 KB
    body of 64 such images; an explanation of the allowed request."""
    side = math.isqrt(config["max_image_pixels"])
    per_request = max(1, min(config["max_images"], config["max_request_pixels"] // side**2))
    webp = base64.b64encode(_image("WEBP", side, "RGB", lossless=True)).decode()
    png = base64.b64encode(_image("PNG", side, "L")).decode()
    jpeg = base64.b64encode(_image("JPEG", side, "RGB", quality=90)).decode()
    allowed = {"images": [webp] * per_request}
    return [
        Costly(f"{per_request} x {side}^2 one-colour WebP", _json(allowed)),
        Costly(f"{per_request} x {side}^2 grey PNG", _json({"images": [png] * per_request})),
        Costly(f"{per_request} x {side}^2 JPEG", _json({"images": [jpeg] * per_request})),
        Costly(f"explain {per_request} x {side}^2 WebP", _json(allowed), explain=True),
        Costly(
            f"{config['max_images']} x {side}^2 WebP (over max_request_pixels)",
            _json({"images": [webp] * config["max_images"]}),
            expect=OVER,
        ),
        Costly(
            f"explain {config['max_images']} x {side}^2 WebP",
            _json({"images": [webp] * config["max_images"]}),
            explain=True,
            expect=OVER_EXPLAIN,
        ),
    ]


REVIEW = "a long review about the plot and the cast, the music and the ending "


def longest_words(cost: Callable[[str], int], limit: int, max_bytes: int, most: int = 2000) -> str:
    """The longest run of REVIEW's words whose explanation cost is within `limit` and whose UTF-8
    is within `max_bytes` (an explanation's passes are bounded whatever the text's length, so the
    text's own limit can be the one that binds)."""
    words = (REVIEW * (most // 10 + 1)).split()[:most]

    def allowed(text: str) -> bool:
        return len(text.encode()) <= max_bytes and cost(text) <= limit

    lo, hi = 1, most
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if allowed(" ".join(words[:mid])):
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


def text(config: dict, known: Known) -> list[Costly]:
    """max_texts texts of max_text_bytes each; explanations of the longest text within
    max_explain_tokens (when its cost function is known) and of the longest texts allowed."""
    explain_cost = known.explain_cost
    longest = (REVIEW * (config["max_text_bytes"] // len(REVIEW) + 1))[: config["max_text_bytes"]]
    texts = {"texts": [longest] * config["max_texts"]}
    out = [
        Costly(f"{config['max_texts']} x {config['max_text_bytes']}-byte texts", _json(texts)),
        Costly(f"explain {config['max_texts']} longest texts", _json(texts), explain=True,
               expect=OVER_EXPLAIN),
        Costly("text over max_text_bytes", _json({"text": longest + "x"}), expect=OVER),
    ]  # fmt: skip
    if explain_cost is not None:
        words = longest_words(explain_cost, config["max_explain_tokens"], config["max_text_bytes"])
        out.append(
            Costly("explain the costliest text allowed", _json({"text": words}), explain=True)
        )
    return out


def signal(config: dict, known: Known) -> list[Costly]:
    """max_samples at every frequency the export serves (`frequencies`, `sample_rate`), as JSON,
    as float32 and as a stream's first chunk; the explanation of the longest signal within
    max_explain_samples; the first past each limit."""
    if not {"frequencies", "sample_rate"} <= set(known.export):
        raise ValueError(
            "a signal model's worst cases need its frequencies and sample_rate: its manifest, or "
            "`export` in its tools/<model>/samples.py"
        )
    frequencies = tuple(known.export["frequencies"])
    rate = known.export["sample_rate"]
    n = config["max_samples"]
    signal = np.sin(np.arange(n) * (2 * np.pi * frequencies[0] / rate)).astype(np.float32)
    every = ",".join(f"{f:g}" for f in frequencies)
    block = config.get("explain_block", 100)
    explainable = _longest_explained(config["max_explain_samples"], block, len(frequencies))
    return [
        Costly(f"{n} samples x {len(frequencies)} frequencies",
               _json({"signal": signal.tolist(), "frequencies": list(frequencies)})),
        Costly(f"{n} float32 samples x {len(frequencies)} frequencies", signal.tobytes(),
               "application/octet-stream", {"X-Frequencies": every}),
        Costly(f"stream start of {n} samples",
               _json({"signal": signal.tolist(), "stream": True})),
        Costly(f"explain {explainable} samples x {len(frequencies)} frequencies",
               _json({"signal": signal[:explainable].tolist()}), explain=True),
        Costly(f"explain {n} samples", _json({"signal": signal.tolist()}), explain=True,
               expect=OVER_EXPLAIN),
        Costly(f"{n + 1} samples", _json({"signal": [0.0] * (n + 1)}), expect=OVER),
        Costly(f"{4 * n} float32 samples", np.zeros(4 * n, "<f4").tobytes(),
               "application/octet-stream", expect=OVER),
    ]  # fmt: skip


def _longest_explained(limit: int, block: int, frequencies: int) -> int:
    """Samples of the longest signal whose occlusion explanation (handlers/kits/signal/explain.py:
    blocks of `block`, stride half of it, one pass more, per frequency) costs at most `limit`."""
    stride = max(1, block // 2)

    def cost(n: int) -> int:
        blocks = max(1, (max(n - block, 0) + stride - 1) // stride + 1)
        return (blocks + 1) * frequencies * n

    n = 1
    while cost(n + 1) <= limit:
        n += 1
    return n


def tabular(config: dict, known: Known) -> list[Costly]:
    """max_records records (the model's example) as JSON and as CSV rows; the explanation of the
    most records within max_explain_passes (a pass per feature, plus one, per record); the first
    past each limit."""
    example = dict(known.example)
    n = config["max_records"]
    per = 1 if config["explain_method"] == "ablation" else config["explain_samples"]
    explainable = config["max_explain_passes"] // (len(example) * per + 1)
    header = ",".join(f'"{k}"' for k in example)

    def csv(rows: int) -> bytes:
        return "\n".join([header] + [",".join(map(repr, example.values()))] * rows).encode()

    def records(k: int) -> bytes:
        return _json({"records": [example] * k})

    return [
        Costly(f"{n} records", records(n)),
        Costly(f"{n} CSV rows", csv(n), "text/csv"),
        Costly(f"explain {explainable} records", records(explainable), explain=True),
        Costly(f"explain {explainable + 1} records", records(explainable + 1), explain=True,
               expect=OVER_EXPLAIN),
        Costly(f"{n + 1} records", records(n + 1), expect=OVER),
        Costly(f"{n + 1} CSV rows", csv(n + 1), "text/csv", expect=OVER),
    ]  # fmt: skip


def model_config(model: str) -> dict:
    """handlers/<model>/model-config.yaml: TorchServe's batching and the `handler:` block."""
    return yaml.safe_load((ROOT / "handlers" / model / "model-config.yaml").read_text())


def limits(model: str) -> dict:
    """Every serving knob of the model's archive, defaults included."""
    settings = registry.get(model).spec().settings
    return settings.parse(model_config(model).get("handler") or {}, model).model_dump()


KITS: dict[str, Callable[[dict, Known], list[Costly]]] = {
    "image": image,
    "text": text,
    "signal": signal,
    "tabular": tabular,
}
"""Each modality kit's worst cases (handlers/kits/<kit>/), from the limits and what is `Known`."""


def for_model(
    model: str,
    artifacts: Path | None = None,
    explain_cost: Callable[[str], int] | None = None,
) -> list[Costly]:
    """The worst requests of a registered model ([] for any other), those of each kit its registry
    line names: `artifacts` (its manifest) says what its export serves (else its samples'
    `export`); `explain_cost` prices a text's explanation."""
    if model not in registry.names():
        return []
    spec = registry.get(model)
    samples = spec.samples()
    if artifacts:
        export = read_manifest(artifacts)["handler"]
    else:
        export = samples.export() if samples.export else {}
    known = Known(samples.example, export, explain_cost)
    config = limits(model)
    return [c for kit in spec.kits if kit in KITS for c in KITS[kit](config, known)]
