"""One seeded fine-tuning pass: AdamW, linear warmup/decay, length-bucketed batches, tqdm."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from training.sentiment.config import SentimentConfig
from training.sentiment.encoding import length_batches, pad_rows
from training.sentiment.model import SentimentModel


@dataclass
class History:
    """Per-step training loss and accuracy (of the dropout-on batch predictions)."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    accuracy: list[float] = field(default_factory=list)
    seconds: float = 0.0


def _optimizer(model: SentimentModel, cfg: SentimentConfig) -> torch.optim.Optimizer:
    def trainable(module: nn.Module) -> list[nn.Parameter]:
        return [p for p in module.parameters() if p.requires_grad]

    # The pretrained encoder needs small steps; the fresh head learns faster with a larger one.
    return torch.optim.AdamW(
        [
            {"params": trainable(model.encoder), "lr": cfg.lr_encoder},
            {"params": trainable(model.head), "lr": cfg.lr_head},
        ],
        weight_decay=cfg.weight_decay,
    )


def fine_tune(
    model: SentimentModel,
    rows: list[list[int]],
    labels: np.ndarray,
    cfg: SentimentConfig,
    pad_token_id: int,
) -> History:
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    lengths = np.array([len(r) for r in rows])
    plan = [b for _ in range(cfg.epochs) for b in length_batches(lengths, cfg.batch_size, rng)]
    optimizer = _optimizer(model, cfg)
    warmup = max(1, int(len(plan) * cfg.warmup_fraction))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda s: min((s + 1) / warmup, max(0.0, (len(plan) - s) / max(1, len(plan) - warmup))),
    )
    loss_fn = nn.CrossEntropyLoss()
    history = History()
    model.train()
    started = time.perf_counter()
    bar = tqdm(plan, desc=f"fine-tune ({cfg.name})", unit="batch", disable=not cfg.progress)
    for step, idx in enumerate(bar):
        batch = pad_rows([rows[i] for i in idx], pad_token_id)
        target = torch.from_numpy(labels[idx])
        logits, _ = model(torch.from_numpy(batch.input_ids), torch.from_numpy(batch.attention_mask))
        loss = loss_fn(logits, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        acc = float((logits.argmax(-1) == target).float().mean())
        history.step.append(step)
        history.loss.append(loss.item())
        history.accuracy.append(acc)
        recent = slice(-20, None)
        bar.set_postfix(
            loss=f"{np.mean(history.loss[recent]):.3f}",
            acc=f"{np.mean(history.accuracy[recent]):.3f}",
        )
    history.seconds = time.perf_counter() - started
    model.eval()
    return history
