"""Fine-tuning as a LightningModule: AdamW, linear warmup/decay, length-bucketed batches.

Lightning owns the loop, device moves, mixed precision, gradient clipping (1.0), checkpoints and
the progress bar; this module says what one step is and keeps the per-step history the PNG plot
draws. The batch plan is drawn once from the seed, so a resumed run trains exactly the batches the
interrupted one had left.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from training.common.trainer import TrainerOptions, build_trainer, checkpoint_path
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


class PlannedBatches:
    """A batch sampler over a fixed plan that skips what the trainer has already trained."""

    def __init__(self, plan: list[np.ndarray], steps_done):
        self.plan = plan
        self.steps_done = steps_done

    def __iter__(self):
        yield from (b.tolist() for b in self.plan[self.steps_done() :])

    def __len__(self) -> int:
        return len(self.plan) - self.steps_done()


class SentimentModule(L.LightningModule):
    def __init__(self, model: SentimentModel, cfg: SentimentConfig, total_steps: int):
        super().__init__()
        self.model = model
        self.cfg = cfg
        self.total_steps = total_steps
        self.loss_fn = nn.CrossEntropyLoss()
        self.history = History()

    def training_step(self, batch, batch_idx):
        input_ids, attention_mask, target = batch
        logits, _ = self.model(input_ids, attention_mask)
        loss = self.loss_fn(logits.float(), target)
        acc = (logits.argmax(-1) == target).float().mean()
        self.log("train_loss", loss, prog_bar=True)
        self.log("train_acc", acc, prog_bar=True)
        self.history.step.append(int(self.global_step))
        self.history.loss.append(float(loss.detach()))
        self.history.accuracy.append(float(acc))
        return loss

    def configure_optimizers(self):
        def trainable(module: nn.Module) -> list[nn.Parameter]:
            return [p for p in module.parameters() if p.requires_grad]

        cfg, total = self.cfg, self.total_steps
        # The pretrained encoder needs small steps; the fresh head learns faster with a larger one.
        optimizer = torch.optim.AdamW(
            [
                {"params": trainable(self.model.encoder), "lr": cfg.lr_encoder},
                {"params": trainable(self.model.head), "lr": cfg.lr_head},
            ],
            weight_decay=cfg.weight_decay,
        )
        warmup = max(1, int(total * cfg.warmup_fraction))
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimizer,
            lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup))),
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # The plot's per-step history rides along, so a resumed run still draws the whole curve.
        checkpoint["history"] = self.history.__dict__

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "history" in checkpoint:
            self.history = History(**checkpoint["history"])


def batch_plan(rows: list[list[int]], cfg: SentimentConfig) -> list[np.ndarray]:
    rng = np.random.default_rng(cfg.seed)
    lengths = np.array([len(r) for r in rows])
    return [b for _ in range(cfg.epochs) for b in length_batches(lengths, cfg.batch_size, rng)]


def fine_tune(
    model: SentimentModel,
    rows: list[list[int]],
    labels: np.ndarray,
    cfg: SentimentConfig,
    pad_token_id: int,
    opts: TrainerOptions | None = None,
    out=None,
    logger=None,
) -> History:
    """Train `model` in place (it ends on the CPU, in eval mode, for export) and return its history."""
    import tempfile

    opts = opts or TrainerOptions()
    plan = batch_plan(rows, cfg)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module = SentimentModule(model, cfg, len(plan))

    def collate(idx: list[int]):
        enc = pad_rows([rows[i] for i in idx], pad_token_id)
        return (torch.from_numpy(enc.input_ids), torch.from_numpy(enc.attention_mask),
                torch.from_numpy(labels[idx]))  # fmt: skip

    with tempfile.TemporaryDirectory() as tmp:
        ckpt_root = Path(out if out is not None else tmp)
        trainer = build_trainer(opts, ckpt_root, max_steps=len(plan), progress=cfg.progress,
                                logger=logger, gradient_clip_val=1.0, cpu_bf16=cfg.cpu_bf16)  # fmt: skip
        batches = PlannedBatches(plan, lambda: trainer.global_step)
        indices: Any = range(len(rows))  # a map-style dataset of indices; the sampler plans them
        loader: DataLoader = DataLoader(indices, batch_sampler=batches, collate_fn=collate)
        # Lightning keeps each submodule's mode; the pretrained encoder loads in eval mode, and
        # its dropout belongs to fine-tuning as much as the head's.
        model.train()
        started = time.perf_counter()
        trainer.fit(module, loader, ckpt_path=checkpoint_path(ckpt_root, opts))
        module.history.seconds += time.perf_counter() - started
    model.cpu().float().eval()
    return module.history
