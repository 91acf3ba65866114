"""Batched inference, out-of-distribution probes and the metrics written to metrics.json."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

from handlers.uncertainty import MLPHead, classify_with_uncertainty, softmax
from training.common.calibration import (
    auroc,
    expected_calibration_error,
    fit_temperature,
    nll,
    reliability_bins,
)
from training.sentiment.data import Split
from training.sentiment.encoding import length_batches, pad_rows
from training.sentiment.model import SentimentModel
from training.sentiment.train import PlannedBatches


@dataclass(frozen=True)
class Predictions:
    logits: np.ndarray
    """(N, 2) deterministic, unscaled."""
    features: np.ndarray
    """(N, D) input of the head."""


class _Inference(L.LightningModule):
    """Eval-mode (logits, features) per batch, in full precision (the calibration figures)."""

    def __init__(self, model: SentimentModel):
        super().__init__()
        self.model = model

    def predict_step(self, batch, batch_idx):
        logits, features = self.model(*batch)
        return logits.float().cpu().numpy(), features.float().cpu().numpy()


def predict(
    model: SentimentModel,
    rows: list[list[int]],
    pad_token_id: int,
    batch_size: int,
    desc: str,
    progress: bool = True,
    accelerator: str = "cpu",
) -> Predictions:
    """Eval-mode logits and features, batched by length, returned in the order of `rows`.

    Lightning's predict loop runs it where training ran (`accelerator`), one device, no grad."""
    lengths = np.array([len(r) for r in rows])
    plan = list(length_batches(lengths, batch_size))
    batches = [b.tolist() for b in plan]

    def collate(idx: list[int]):
        enc = pad_rows([rows[i] for i in idx], pad_token_id)
        return torch.from_numpy(enc.input_ids), torch.from_numpy(enc.attention_mask)

    # A sampler object, not a list: Lightning's predict loop wraps it to record batch indices.
    sampler = PlannedBatches(plan, lambda: 0)
    indices: Any = range(len(rows))  # a map-style dataset of indices, as in train.py
    loader: DataLoader = DataLoader(indices, batch_sampler=sampler, collate_fn=collate)
    trainer = L.Trainer(accelerator=accelerator, devices=1, precision="32-true", logger=False,
                        enable_progress_bar=progress, enable_model_summary=False)  # fmt: skip
    module = _Inference(model.eval())
    outputs = trainer.predict(module, loader)
    if outputs is None:  # only with return_predictions=False
        raise RuntimeError("Lightning's predict loop returned no predictions")
    model.cpu()
    logits = np.zeros((len(rows), 2), np.float32)
    features = np.zeros((len(rows), outputs[0][1].shape[1]), np.float32)
    for idx, (out, feats) in zip(batches, outputs, strict=True):
        logits[idx] = out
        features[idx] = feats
    if progress:
        print(f"{desc}: {len(rows)} texts", flush=True)
    return Predictions(logits, features)


def onnx_predict(
    path: Path,
    rows: Sequence[list[int]],
    threads: int,
    desc: str = "",
    progress: bool = False,
    outputs: Sequence[str] = ("logits", "features"),
) -> Predictions:
    """Logits and features of the ONNX file at `path`, each text alone (one runtime call per text
    at its own length, as a CPU worker serves it), in the order of `rows`.

    `threads` sessions of one intra-op thread each run side by side (ONNX Runtime releases the
    GIL): on 2 cores that ran 1.4x the eager-equivalent length-sorted batches of 64 on 2 threads
    (the evaluation before), and the figures are those of the file the server runs. No padding:
    every call is one unpadded text. Dynamic int8 must run this way: its activation scale is per
    call."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    workers = max(1, threads)
    sessions = [
        ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        for _ in range(workers)
    ]
    results: list[list[np.ndarray]] = [[] for _ in rows]
    # Longest first, dealt round-robin: the workers finish together.
    order = np.argsort([-len(r) for r in rows], kind="stable")
    shards = [order[k::workers] for k in range(workers)]
    bar = tqdm(total=len(rows), desc=desc or path.name, unit="text", disable=not progress)

    def work(session, shard: np.ndarray) -> None:
        for i in shard:
            ids = np.asarray([rows[i]], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            results[i] = session.run(list(outputs), feeds)
            bar.update()

    with ThreadPoolExecutor(workers) as pool:
        for f in [pool.submit(work, s, shard) for s, shard in zip(sessions, shards, strict=True)]:
            f.result()
    bar.close()
    if not rows:
        return Predictions(np.zeros((0, 2), np.float32), np.zeros((0, 0), np.float32))
    columns = [np.concatenate([r[k] for r in results]).astype(np.float32, copy=False)
               for k in range(len(outputs))]  # fmt: skip
    features = columns[1] if len(columns) > 1 else np.zeros((len(rows), 0), np.float32)
    return Predictions(columns[0], features)


def shuffled_word_texts(texts: list[str], seed: int) -> list[str]:
    """In-vocabulary words with the syntax destroyed: same tokens, no sentences."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.permutation(t.split())) for t in texts]


def random_token_texts(
    vocab: list[str], n: int, seed: int, words: tuple[int, int] = (20, 120)
) -> list[str]:
    """Strings of random vocabulary words: nothing a reviewer would write."""
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(vocab, size=int(rng.integers(*words)))) for _ in range(n)]


def plain_vocabulary(tokenizer) -> list[str]:
    """Whole alphabetic words of the tokenizer vocabulary (no [unused], no ## pieces)."""
    return sorted(w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) > 2)


def _rounded(d: dict) -> dict:
    """6 decimals; nan (e.g. AUROC with no errors in a tiny test set) → None, valid JSON."""

    def fix(v):
        if isinstance(v, float):
            return round(v, 6) if np.isfinite(v) else None
        return v

    return {k: fix(v) for k, v in d.items()}


def classification_metrics(
    validation: Predictions,
    validation_split: Split,
    test: Predictions,
    test_split: Split,
    ood: dict[str, Predictions],
    head: MLPHead,
    mc_samples: int,
    n_bins: int = 15,
) -> tuple[dict, dict]:
    """(metrics for metrics.json, reliability bins before/after for plots)."""
    temperature = fit_temperature(validation.logits, validation_split.label)
    y = test_split.label
    pred = test.logits.argmax(-1)
    correct = pred == y
    p_raw = softmax(test.logits, 1.0)
    p_cal = softmax(test.logits, temperature)
    by_source = {
        f"test_accuracy_{s}": float(correct[test_split.source == s].mean())
        for s in np.unique(test_split.source)
    }
    masks = head.masks(mc_samples, seed=0)
    unc = classify_with_uncertainty(test.features, head, masks, temperature)
    errors = ~correct
    metrics = {
        "test_size": int(len(y)),
        "test_size_imdb": int((test_split.source == "imdb").sum()),
        "validation_size": int(len(validation_split)),
        "test_accuracy": float(correct.mean()),
        **by_source,
        "temperature": temperature,
        "ece_before": expected_calibration_error(p_raw, y, n_bins),
        "ece_after": expected_calibration_error(p_cal, y, n_bins),
        "nll_before": nll(test.logits, y, 1.0),
        "nll_after": nll(test.logits, y, temperature),
        "validation_ece_before": expected_calibration_error(
            softmax(validation.logits), validation_split.label, n_bins
        ),
        "validation_ece_after": expected_calibration_error(
            softmax(validation.logits, temperature), validation_split.label, n_bins
        ),
        "mc_samples": mc_samples,
        "test_errors": int(errors.sum()),
        "error_auroc_entropy": auroc(unc.entropy, errors),
        "error_auroc_mutual_information": auroc(unc.mutual_information, errors),
        "error_auroc_mc_std": auroc(unc.std, errors),
        "mean_entropy_in_domain": float(unc.entropy.mean()),
        "mean_mutual_information_in_domain": float(unc.mutual_information.mean()),
    }
    imdb = test_split.source == "imdb"
    for kind, p in ood.items():
        u = classify_with_uncertainty(p.features, head, masks, temperature)
        metrics[f"mean_entropy_ood_{kind}"] = float(u.entropy.mean())
        metrics[f"mean_mutual_information_ood_{kind}"] = float(u.mutual_information.mean())
        # OOD detection against in-domain IMDB reviews: 1.0 means every OOD text is more uncertain.
        is_ood = np.r_[np.ones(len(u.entropy), bool), np.zeros(int(imdb.sum()), bool)]
        metrics[f"ood_auroc_entropy_{kind}"] = auroc(np.r_[u.entropy, unc.entropy[imdb]], is_ood)
        metrics[f"ood_auroc_mutual_information_{kind}"] = auroc(
            np.r_[u.mutual_information, unc.mutual_information[imdb]], is_ood
        )
    bins = {
        "before": reliability_bins(p_raw, y, n_bins),
        "after": reliability_bins(p_cal, y, n_bins),
    }
    return _rounded(metrics), bins
