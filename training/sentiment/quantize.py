"""model.int8.onnx: ONNX Runtime dynamic int8 quantization of the encoder, and the gate it must pass.

The gate compares int8 with fp32 on the IMDB reviews of the selection (validation) split: accuracy
within `max_accuracy_drop` and ECE after calibration within `max_ece_increase`. The test split is
read once, after the gate passed, for the figures the report and the README give and the per-item
answers `make check-served` holds the served int8 model to. Calibration is the
manifest's temperature (fitted on fp32's validation logits), because that is the temperature the
handler serves int8 with. A refused model is never written, and the report says why.

The head (every node computed from the `features` output) stays float32: the handler's MC-dropout
head re-runs it in numpy over the features and checks at load that it reproduces the graph's logits.

    python -m training.sentiment.quantize --artifacts artifacts/sentiment   # add int8 to an export
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from handlers.uncertainty import softmax
from training.common.calibration import expected_calibration_error

if TYPE_CHECKING:
    from training.sentiment.data import Split

INT8_FILE = "model.int8.onnx"
FEATURES = "features"


@dataclass(frozen=True)
class Int8Gate:
    max_accuracy_drop: float = 0.005
    """IMDB selection accuracy (a fraction): int8 may be at most this much below fp32 (half a point:
    int8 is the CPU default, so it must be as good as what it replaces)."""
    max_ece_increase: float = 0.01
    """ECE after calibration: int8 may be at most this much above fp32."""
    max_ece: float | None = 0.02
    """ECE after calibration of int8 itself: at most this, whatever fp32's (None: no absolute
    limit, for a model whose fp32 cannot meet it either: the tiny test config)."""


def head_nodes(model) -> list[str]:
    """Names of the nodes downstream of the `features` output (ONNX nodes are topologically sorted)."""
    reached, names = {FEATURES}, []
    for node in model.graph.node:
        if reached.intersection(node.input):
            names.append(node.name)
            reached.update(node.output)
    return names


LAYER = re.compile(r"/layer\.(\d+)/")
"""An encoder layer's part of a node name (`/encoder/encoder/layer.3/attention/...`)."""


def encoder_layers(model) -> dict[str, list[str]]:
    """The encoder's MatMul nodes by layer ("0", "1", ...), in graph order."""
    layers: dict[str, list[str]] = {}
    for node in model.graph.node:
        hit = LAYER.search(node.name)
        if node.op_type == "MatMul" and hit:
            layers.setdefault(hit.group(1), []).append(node.name)
    return layers


def quantize_encoder(src: Path, dst: Path, keep_float: Sequence[str] = ()) -> None:
    """Dynamic (weights int8 ahead of time, activations quantized per batch) quantization, the
    ONNX Runtime recipe for transformer encoders on CPU: no calibration data needed. The head and
    the encoder layers named in `keep_float` stay float32.

    Measured on a MiniLM export (3,000 training reviews; 2,490 IMDB test reviews, fp32 0.8655):
    per-tensor scales over every op lost 3.2 accuracy points (refused by the gate); per-channel
    0.9; per-channel on the MatMuls only (embeddings stay float) 0.4, with ECE 0.001 better and
    1.98x fp32's speed at batch 8 x 256 on 2 threads. That last recipe is this one."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model = onnx.load(str(src), load_external_data=False)
    head = head_nodes(model)
    layers = encoder_layers(model)
    # The quantizer first rewrites each Gemm as MatMul (named <gemm>_MatMul) + Add, then matches
    # nodes_to_exclude against the rewritten names: list both.
    keep = [*head, *(f"{name}_MatMul" for name in head)]
    keep += [name for layer in keep_float for name in layers[layer]]
    quantize_dynamic(
        str(src),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        op_types_to_quantize=["MatMul"],
        nodes_to_exclude=keep,
    )


def kept_float(sensitivity: dict[str, float], float_layers: int) -> list[str]:
    """The `float_layers` layers whose quantization moved the answers most, in layer order; never
    every layer (a one-layer encoder keeps none: its int8 export is all int8)."""
    most_moved = sorted(sensitivity, key=sensitivity.__getitem__, reverse=True)
    return sorted(most_moved[: min(float_layers, len(sensitivity) - 1)], key=int)


def layer_sensitivity(
    src: Path, probe: Sequence[list[int]], threads: int, workdir: Path
) -> dict[str, float]:
    """How far quantizing each encoder layer alone moves the model's answers: the mean KL
    divergence of its class probabilities from fp32's over `probe` (token rows of training
    reviews: no labels read, no split a choice or a figure is made on)."""
    import onnx

    from training.sentiment.evaluate import onnx_predict

    layers = encoder_layers(onnx.load(str(src), load_external_data=False))
    p32 = softmax(np.asarray(onnx_predict(src, probe, threads, outputs=("logits",)).logits), 1.0)
    kl = {}
    for layer in layers:
        candidate = workdir / f"layer{layer}.int8.onnx"
        quantize_encoder(src, candidate, keep_float=[other for other in layers if other != layer])
        logits = onnx_predict(candidate, probe, threads, outputs=("logits",)).logits
        candidate.unlink()
        pq = softmax(np.asarray(logits), 1.0)
        kl[layer] = float((p32 * (np.log(p32) - np.log(pq))).sum(-1).mean())
    return kl


def gate_metrics(logits: np.ndarray, labels: np.ndarray, temperature: float) -> dict:
    probs = softmax(logits, temperature)
    return {
        "accuracy": float((logits.argmax(-1) == labels).mean()),
        "ece_after": expected_calibration_error(probs, labels),
    }


def judge(fp32: dict, int8: dict, gate: Int8Gate) -> list[str]:
    """The reasons int8 is refused; empty when it passes."""
    reasons = []
    drop = fp32["accuracy"] - int8["accuracy"]
    if drop > gate.max_accuracy_drop:
        reasons.append(
            f"IMDB selection accuracy {int8['accuracy']:.4f} is {drop * 100:.2f} points below fp32's "
            f"{fp32['accuracy']:.4f} (limit {gate.max_accuracy_drop * 100:.2f})"
        )
    if gate.max_ece is not None and int8["ece_after"] > gate.max_ece:
        reasons.append(
            f"ECE after calibration {int8['ece_after']:.4f} is above {gate.max_ece} (the limit "
            f"of a default runtime)"
        )
    rise = int8["ece_after"] - fp32["ece_after"]
    if rise > gate.max_ece_increase:
        reasons.append(
            f"ECE after calibration {int8['ece_after']:.4f} is {rise:.4f} above fp32's "
            f"{fp32['ece_after']:.4f} (limit {gate.max_ece_increase})"
        )
    return reasons


INT8_POLICIES = ("where-served", "always")


def int8_skipped_because(policy: str, flags: set[str] | None = None) -> str | None:
    """Why this CPU builds no int8 export under `policy` (SentimentConfig.int8); None: build it.
    `flags`: the CPU's (default: this machine's)."""
    from handlers.runtime import INT8_DOT_FLAGS, cpu_info

    if policy not in INT8_POLICIES:
        raise ValueError(f"int8 policy {policy!r}: one of {', '.join(INT8_POLICIES)}")
    have = cpu_info()[1] if flags is None else flags
    if policy == "always" or have.intersection(INT8_DOT_FLAGS):
        return None
    return (
        f"not built on this CPU: it has no int8 dot-product instructions "
        f"({', '.join(INT8_DOT_FLAGS)}), so `runtime: auto` serves fp32 here; "
        f"`python -m training.sentiment.quantize --artifacts <dir>` adds a gated int8 export"
    )


def skipped_int8(out_dir: str | Path, reason: str) -> dict:
    """The report of an int8 export that was not built (a stale one is removed)."""
    out = Path(out_dir)
    (out / INT8_FILE).unlink(missing_ok=True)
    return {"written": False, "file": INT8_FILE, "skipped_because": reason, "refused_because": []}


def _imdb_logits(
    model: Path, rows: Sequence[list[int]], split, threads: int, desc: str, progress: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The IMDB rows of `split` (their indices) and `model`'s logits for them, one review per
    call, as the handler runs int8 (each text alone: its activation scale is its own)."""
    from training.sentiment.evaluate import onnx_predict

    imdb = np.flatnonzero(np.asarray(split.source) == "imdb")
    logits = onnx_predict(model, [rows[int(i)] for i in imdb], threads, desc, progress,
                          outputs=("logits",)).logits  # fmt: skip
    return imdb, np.asarray(logits)


def gated_int8_export(
    out_dir: str | Path,
    rows: Sequence[list[int]],
    split,
    fp32_logits: np.ndarray,
    temperature: float,
    threads: int = 2,
    gate: Int8Gate = Int8Gate(),
    progress: bool = False,
    keep: dict | None = None,
    test: tuple[Sequence[list[int]], Split, np.ndarray] | None = None,
    probe: Sequence[list[int]] = (),
    float_layers: int = 1,
) -> dict:
    """Quantize out_dir/model.onnx and gate it on the IMDB rows of `split` (the selection split;
    `fp32_logits`: model.onnx's for all of its rows); write out_dir/model.int8.onnx only if it
    passes. Returns the report (for metrics and the manifest).
    `test`: the test split's (rows, split, fp32 logits), read once after the gate passed: the
    report's `test` figures, and `keep` gets the int8 logits of its IMDB rows ("logits") and
    their test-split rows ("rows").
    `probe`: token rows of training reviews; the `float_layers` encoder layers whose quantization
    alone moves the answers on them most (`layer_sensitivity`) stay float32. No probe: every
    layer is quantized."""
    out = Path(out_dir)
    final = out / INT8_FILE
    final.unlink(missing_ok=True)  # a stale int8 must never ride along with a new fp32
    started = time.perf_counter()
    tested: dict | None = None
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        candidate = Path(tmp) / INT8_FILE
        sensitivity = (
            layer_sensitivity(out / "model.onnx", probe, threads, Path(tmp))
            if probe and float_layers > 0
            else {}
        )
        kept = kept_float(sensitivity, float_layers)
        quantize_encoder(out / "model.onnx", candidate, keep_float=kept)
        imdb, int8_logits = _imdb_logits(candidate, rows, split, threads, "int8 gate", progress)
        labels = np.asarray(split.label)[imdb]
        fp32 = gate_metrics(np.asarray(fp32_logits)[imdb], labels, temperature)
        int8 = gate_metrics(int8_logits, labels, temperature)
        reasons = judge(fp32, int8, gate)
        if not reasons and test is not None:
            test_rows, test_split, test_fp32 = test
            rows_t, logits_t = _imdb_logits(candidate, test_rows, test_split, threads,
                                            "int8 test", progress)  # fmt: skip
            labels_t = np.asarray(test_split.label)[rows_t]
            tested = {
                "reviews": int(rows_t.size),
                "fp32": gate_metrics(np.asarray(test_fp32)[rows_t], labels_t, temperature),
                "int8": gate_metrics(logits_t, labels_t, temperature),
            }
            if keep is not None:
                keep.update(logits=logits_t, rows=rows_t)
        if not reasons:
            candidate.replace(final)
    report = {
        "written": not reasons,
        "file": INT8_FILE,
        "split": "selection",
        "reviews": int(imdb.size),
        "temperature": float(temperature),
        "float_layers": kept,
        "sensitivity": {layer: round(kl, 7) for layer, kl in sensitivity.items()},
        "probe_reviews": len(probe),
        "fp32": fp32,
        "int8": int8,
        "gate": asdict(gate),
        "refused_because": reasons,
        "test": tested,
        "size_mb": round(final.stat().st_size / 1e6, 1) if not reasons else None,
        "fp32_size_mb": round((out / "model.onnx").stat().st_size / 1e6, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }
    if reasons:
        print(
            f"int8 export refused, {INT8_FILE} not written: {'; '.join(reasons)}", file=sys.stderr
        )
    return report


def add_to_artifacts(artifacts: Path, seed: int = 0, gate: Int8Gate = Int8Gate()) -> dict:
    """Gate and add model.int8.onnx to a finished export; fp32 logits come from its model.onnx
    (parity-checked against eager), and the manifest gains the file's sha256 and the report."""
    from handlers.kits.text.settings import TextExport
    from handlers.kits.text.tokenize import TextEncoder
    from training.common.manifest import read_manifest, sha256_file
    from training.sentiment.config import DEFAULT
    from training.sentiment.data import load_splits

    manifest = read_manifest(artifacts)
    export = TextExport.from_block(manifest["handler"])
    pad, threads = export.pad_token_id, 2
    # The serving tokenization (the handler's encoder over the exported tokenizer.json).
    encoder = TextEncoder(artifacts / export.tokenizer, export.max_length, pad, export.kept_head())
    splits = load_splits(seed)
    from training.sentiment.evaluate import onnx_predict

    def imdb_rows(split):
        imdb = split.take(np.flatnonzero(split.source == "imdb"))
        rows = [encoder.encode([text]).input_ids[0].tolist() for text in imdb.text]
        logits = onnx_predict(artifacts / "model.onnx", rows, threads, outputs=("logits",)).logits
        return rows, imdb, logits

    rows, selection, fp32_logits = imdb_rows(splits.validation)
    probe = splits.train.sample(DEFAULT.int8_probe_size, seed)
    report = gated_int8_export(
        artifacts, rows, selection, fp32_logits, export.temperature, threads, gate,
        test=imdb_rows(splits.test),
        probe=[encoder.encode([text]).input_ids[0].tolist() for text in probe.text],
        float_layers=DEFAULT.int8_float_layers,
    )  # fmt: skip
    manifest["files"].pop(INT8_FILE, None)
    if report["written"]:
        manifest["files"][INT8_FILE] = sha256_file(artifacts / INT8_FILE)
    manifest["metrics"]["int8"] = report
    (artifacts / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.sentiment.quantize", description=__doc__)
    p.add_argument("--artifacts", type=Path, required=True, help="a finished sentiment export")
    p.add_argument("--seed", type=int, default=0, help="the training seed (fixes the splits)")
    args = p.parse_args(argv)
    report = add_to_artifacts(args.artifacts, args.seed)
    print(json.dumps(report, indent=2))
    return 0 if report["written"] else 1


if __name__ == "__main__":
    sys.exit(main())
