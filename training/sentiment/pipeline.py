"""train → export + parity gate → evaluate/calibrate → head, tokenizer, metrics, plots → manifest."""

from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from handlers.kits.text.settings import HEAD_TAIL, TextExport
from handlers.uncertainty import softmax
from training.common import plots
from training.common.floors import check_floors, floor_report, staged_export
from training.common.machine import describe_cpu
from training.common.manifest import write_manifest
from training.common.tracking import TrainingRun
from training.common.trainer import TrainerOptions, precision_for, resolved_accelerator
from training.sentiment.config import SentimentConfig
from training.sentiment.data import LABELS, load_splits
from training.sentiment.encoding import token_rows
from training.sentiment.evaluate import (
    classification_metrics,
    onnx_predict,
    plain_vocabulary,
    predict,
    random_token_texts,
    shuffled_word_texts,
)
from training.sentiment.export import (
    INPUT_NAMES,
    OUTPUT_NAMES,
    export_onnx,
    export_torchscript,
    verify_exports,
)
from training.sentiment.model import build_model, load_tokenizer
from training.sentiment.quantize import (
    INT8_FILE,
    Int8Gate,
    gated_int8_export,
    int8_skipped_because,
    skipped_int8,
)
from training.sentiment.train import fine_tune

HEAD_FILE = "head.npz"
TOKENIZER_DIR = "tokenizer"
TOKENIZER_FILE = f"{TOKENIZER_DIR}/tokenizer.json"
EXPORT_FILES = ("model.pt", "model.onnx")
SERVE_FILES = [*EXPORT_FILES, HEAD_FILE, TOKENIZER_DIR]


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


PLOTS = ("training_curve.png", "reliability.png")


def training_rows(tokenizer, texts, cfg: SentimentConfig) -> list[list[int]]:
    """Token rows for fine-tuning, at `train_max_length` (never above the served max_length),
    keeping the head+tail split's share of head tokens."""
    length = min(cfg.train_max_length or cfg.max_length, cfg.max_length)
    head = round(cfg.head_tokens * (length - 2) / (cfg.max_length - 2))
    return token_rows(tokenizer, texts, length, head)


def fitted_to(
    cfg: SentimentConfig, opts: TrainerOptions | None = None, flags: set[str] | None = None
) -> SentimentConfig:
    """The config as this machine fine-tunes it: `cpu_fp32_train_size` reviews instead of
    `train_size` on a CPU that both trains in float32 (no native bf16, or `--precision 32-true`)
    and builds no int8 export (no int8 dot products: `int8`), i.e. the AVX2 class; a CPU with int8
    dot products keeps `train_size`, whose int8 passes its gate. The result names the size it
    trains on, so MLflow's params and metrics.json say what ran. `flags`: the CPU's (default: this
    machine's)."""
    opts = opts or TrainerOptions()
    if cfg.cpu_fp32_train_size is None or resolved_accelerator(opts.accelerator) != "cpu":
        return cfg
    if precision_for(opts, cfg.cpu_bf16) != "32-true" or not int8_skipped_because(cfg.int8, flags):
        return cfg
    return replace(cfg, train_size=cfg.cpu_fp32_train_size, cpu_fp32_train_size=None)


def handler_export(
    cfg: SentimentConfig, temperature: float, pad_token_id: int, feature_dim: int
) -> TextExport:
    """What the handler must know about the export (the manifest's handler block, read at load)."""
    return TextExport(
        input_names=tuple(INPUT_NAMES),
        output_names=tuple(OUTPUT_NAMES),
        labels=tuple(LABELS),
        max_length=cfg.max_length,
        temperature=float(temperature),
        pad_token_id=int(pad_token_id),
        truncation=HEAD_TAIL,
        head_tokens=cfg.head_tokens,
        feature_dim=int(feature_dim),
        tokenizer=TOKENIZER_FILE,
        head=HEAD_FILE,
    )


def heldout_predictions(
    out: Path, test, fp32_logits: np.ndarray, temperature: float, int8: dict | None
) -> dict:
    """Training's per-item answers for the reviews check-served asks (heldout.asked): the fp32
    ONNX file's, as scored for the report, and the gated int8 file's where it was written."""
    from training.common.heldout import FP32, INT8, classified, write_predictions
    from training.sentiment.heldout import asked
    from training.sentiment.quantize import Int8Gate

    rows = asked(test.source)
    truth = [LABELS[int(test.label[i])] for i in rows]

    def items(logits: np.ndarray) -> list[dict]:
        return classified(softmax(np.asarray(logits, np.float64), temperature), LABELS, truth)

    runtimes: dict[str, dict] = {FP32: {"items": items(np.asarray(fp32_logits)[rows])}}
    if int8 is not None:
        where = {int(r): k for k, r in enumerate(int8["rows"])}
        allowed = math.ceil(len(rows) * Int8Gate().max_accuracy_drop)
        runtimes[INT8] = {
            "items": items(int8["logits"][[where[i] for i in rows]]),
            "allowed_label_differences": allowed,
            "why": f"the int8 gate's {Int8Gate().max_accuracy_drop * 100:g}-point allowance, "
            f"rounded up to whole reviews",
        }
    return write_predictions(out, "sentiment", f"test, the first {len(rows)} IMDB reviews",
                             "the ONNX files, each review alone, as served", runtimes)  # fmt: skip


def run(
    out_dir: str | Path,
    cfg: SentimentConfig,
    opts: TrainerOptions | None = None,
    tracking: TrainingRun | None = None,
) -> dict:
    """Build a complete artifact directory; returns the manifest. Raises ParityError on a bad export,
    QualityError on a model below the config's quality floors (nothing exported then).

    With `tracking` (an open MLflow run) the run gets per-step and final metrics, the plots and
    reports, and the parity-checked export is registered as a new model version.
    """
    started = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # A stale manifest would vouch for files this run is about to replace, and a stale export
    # must not outlive a run whose model missed the quality floors.
    for name in ("manifest.json", *EXPORT_FILES, INT8_FILE):
        (out / name).unlink(missing_ok=True)
    opts = opts or TrainerOptions()
    cfg = fitted_to(cfg, opts)
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)

    splits = load_splits(cfg.seed)
    train = splits.train.sample(cfg.train_size, cfg.seed)
    validation = splits.validation.sample(cfg.validation_size, cfg.seed + 1)
    test = splits.test.sample(cfg.test_size, cfg.seed + 2)
    ood_source = [t for t, s in zip(test.text, test.source, strict=True) if s == "imdb"]
    tokenizer = load_tokenizer()
    pad = tokenizer.pad_token_id
    ood_texts = {
        "shuffled_words": shuffled_word_texts(ood_source[: cfg.ood_size], cfg.seed),
        "random_tokens": random_token_texts(plain_vocabulary(tokenizer), cfg.ood_size, cfg.seed),
    }

    def rows(texts):
        return token_rows(tokenizer, texts, cfg.max_length, cfg.head_tokens)

    model = build_model(cfg)
    logger = tracking.logger() if tracking else None
    history = fine_tune(
        model, training_rows(tokenizer, train.text, cfg), train.label, cfg, pad, opts, out, logger
    )

    vocab_size = model.encoder.config.vocab_size
    accelerator = resolved_accelerator(opts.accelerator)
    # The export is measured through its own files and reaches `out` only once the quality floors
    # passed: a model below them leaves no model.pt / model.onnx, manifest or registered version.
    with staged_export(out, EXPORT_FILES) as stage:
        export_torchscript(model, stage / "model.pt", vocab_size, pad)
        export_onnx(model, stage / "model.onnx", vocab_size, pad)
        parity = verify_exports(model, stage, cfg.max_length, vocab_size, pad, cfg.threads)
        _write_json(out / "parity.json", parity)

        def infer(texts, desc):
            if accelerator == "cpu":
                # The parity-checked model.onnx, each text alone: the file and the way a CPU
                # worker serves it: 17.0 texts/s against 12.0 for length-sorted batches of 64 on
                # 2 threads (TorchScript, 600 test reviews, the AVX2 EPYC).
                return onnx_predict(stage / "model.onnx", rows(texts), cfg.threads, desc,
                                    cfg.progress)  # fmt: skip
            return predict(model, rows(texts), pad, cfg.eval_batch_size, desc, cfg.progress,
                           accelerator)  # fmt: skip

        val_pred = infer(validation.text, "validation")
        test_pred = infer(test.text, "test")
        ood_pred = {kind: infer(texts, f"ood {kind}") for kind, texts in ood_texts.items()}
        head = model.mlp_head()
        metrics, bins = classification_metrics(
            val_pred, validation, test_pred, test, ood_pred, head, cfg.mc_samples
        )
        if cfg.enforce_floors:
            metrics["quality_floors"] = check_floors("sentiment", metrics, cfg.floors)
        else:
            metrics["quality_floors"] = floor_report(metrics, cfg.floors)
    skip_int8 = int8_skipped_because(cfg.int8)
    int8_answers: dict = {}
    if skip_int8:
        int8 = skipped_int8(out, skip_int8)
    else:
        # The gate is a choice, so it reads the selection split, and model.onnx's logits there.
        selection = splits.validation
        if cfg.int8_selection_size is not None:
            selection = selection.sample(cfg.int8_selection_size, cfg.seed + 1)
        selection_rows = rows(selection.text)
        int8 = gated_int8_export(
            out,
            selection_rows,
            selection,
            onnx_predict(
                out / "model.onnx",
                selection_rows,
                cfg.threads,
                "int8 gate, fp32",
                cfg.progress,
                outputs=("logits",),
            ).logits,  # fmt: skip
            metrics["temperature"],
            cfg.threads,
            Int8Gate(max_ece=cfg.int8_max_ece),
            cfg.progress,
            keep=int8_answers,
            test=(rows(test.text), test, test_pred.logits),
            probe=rows(train.text[: cfg.int8_probe_size]),
            float_layers=cfg.int8_float_layers,
        )
    metrics |= {
        "config": cfg.name,
        "train_size": len(train),
        "train_seconds": round(history.seconds, 1),
        "machine": describe_cpu(),  # the CPU the seconds were measured on
        "final_train_loss": round(sum(history.loss[-20:]) / len(history.loss[-20:]), 6),
    }

    head.save(out / HEAD_FILE)
    tokenizer.save_pretrained(out / TOKENIZER_DIR)
    plots.training_curve(
        history.step,
        history.loss,
        history.accuracy,
        out / "training_curve.png",
        title=f"sentiment fine-tuning ({cfg.name})",
    )
    plots.reliability_diagram(
        {
            "before (T=1)": (bins["before"], metrics["ece_before"]),
            f"after (T={metrics['temperature']:.3f})": (bins["after"], metrics["ece_after"]),
        },
        out / "reliability.png",
        title="test reliability",
    )
    metrics["int8"] = int8
    metrics["wall_seconds"] = round(time.perf_counter() - started, 1)
    _write_json(
        out / "metrics.json", metrics | {"reliability": {k: b.to_dict() for k, b in bins.items()}}
    )

    export = handler_export(cfg, metrics["temperature"], pad, head.weights[0].shape[1])
    serve_files = SERVE_FILES + [INT8_FILE] * int8["written"]
    predictions = heldout_predictions(
        out,
        test,
        test_pred.logits,
        metrics["temperature"],
        int8_answers if int8["written"] else None,
    )
    manifest = write_manifest(out, "sentiment", serve_files, export.to_block(), metrics, parity,
                              predictions=predictions)  # fmt: skip
    if tracking is not None:
        tracking.finish(out, manifest, metrics, PLOTS)
    return manifest
