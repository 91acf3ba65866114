"""Training with Lightning, and the evaluation the metrics, plots and manifest are made of.

Model inputs are made by the serving code's own `handlers.kits.image.reading.model_batch` from the
manifest block this run will write: what the network sees in training is what the handler sends.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import EarlyStopping
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset

from handlers.kits.image.reading import model_batch, resize
from handlers.kits.image.settings import ImageExport
from training.common.trainer import TrainerOptions, build_trainer, checkpoint_path
from training.digits.augment import augmented
from training.digits.config import TrainConfig
from training.digits.data import CLASSES, NATIVE_SIZE, PIXEL_MAX, Split
from training.digits.model import FEATURES_NAME, INPUT_NAME, OUTPUT_NAME, build_model
from training.digits.outliers import synthetic_non_digits


def export_block(cfg: TrainConfig, train: Split, temperature: float = 1.0) -> ImageExport:
    """The manifest's handler block: the input the graph takes and how pixels become it (mean
    and std of the training images at the graph's size)."""
    c, h, w = cfg.input_shape
    pixels = np.stack([resize(g, h, w) for g in train.greys])
    mean, std = float(pixels.mean()), float(pixels.std())
    return ImageExport(
        input_name=INPUT_NAME,
        output_name=OUTPUT_NAME,
        input_shape=(c, h, w),
        layout="NCHW",
        classes=CLASSES,
        pixel_max=PIXEL_MAX,
        native_size=NATIVE_SIZE,
        mean=(round(mean, 6),) * c,
        std=(round(std, 6),) * c,
        temperature=temperature,
        arch=cfg.arch,
        features_name=FEATURES_NAME,
        head="head.npz",
    )


def shifted(x: torch.Tensor, most: int, background: torch.Tensor) -> torch.Tensor:
    """Each image moved by up to `most` pixels each way, the gap filled with the background."""
    if most < 1:
        return x
    n, _, h, w = x.shape
    padded = torch.nn.functional.pad(x - background, (most, most, most, most)) + background
    dy = torch.randint(0, 2 * most + 1, (n,)).tolist()
    dx = torch.randint(0, 2 * most + 1, (n,)).tolist()
    return torch.stack(
        [padded[i, :, y : y + h, z : z + w] for i, (y, z) in enumerate(zip(dy, dx, strict=True))]
    )


class DigitsModule(L.LightningModule):
    def __init__(self, cfg: TrainConfig, export: ImageExport, steps: int):
        super().__init__()
        self.cfg, self.steps = cfg, steps
        torch.manual_seed(cfg.torch_seed)
        self.model = build_model(cfg.arch, cfg.input_shape[0], len(CLASSES), cfg.width, cfg.dropout)
        mean = torch.tensor(export.mean).view(1, -1, 1, 1)
        std = torch.tensor(export.std).view(1, -1, 1, 1)
        self.register_buffer("background", (0.0 - mean) / std)  # a blank pixel, normalised
        self.most = int(round(cfg.shift * cfg.input_shape[1]))
        bank = np.zeros((0, *cfg.input_shape), np.float32)
        if cfg.outlier_weight > 0 and cfg.outlier_images > 0:
            bank = model_batch(synthetic_non_digits(cfg.outlier_images, cfg.torch_seed), export)
        self.register_buffer("outliers", torch.from_numpy(bank), persistent=False)
        # Weights averaged over the last steps (an exponential moving average, batch-norm
        # statistics included): validated, early-stopped on and exported instead of the last ones.
        self.ema = (
            AveragedModel(self.model, multi_avg_fn=get_ema_multi_avg_fn(cfg.ema_decay),
                          use_buffers=True)
            if cfg.ema_decay > 0
            else None
        )  # fmt: skip

    def served(self) -> torch.nn.Module:
        """The network validated and exported: the averaged weights when ema_decay > 0."""
        return self.ema.module if self.ema is not None else self.model

    def on_train_batch_end(self, outputs, batch, batch_idx):
        if self.ema is not None:
            self.ema.update_parameters(self.model)

    def training_step(self, batch, batch_idx):
        x, y, weight = batch
        x = shifted(x, self.most, self.background)
        k = int(round(self.cfg.outlier_fraction * len(x))) if len(self.outliers) else 0
        if k:
            pick = torch.randint(0, len(self.outliers), (k,), device=self.outliers.device)
            x = torch.cat([x, self.outliers[pick]])
        logits, _ = self.model(x)
        digits, others = logits[: len(y)], logits[len(y) :]
        # The dataset's own digits weigh dataset_weight, redrawn copies and glyphs 1.
        each = F.cross_entropy(
            digits, y, label_smoothing=self.cfg.label_smoothing, reduction="none"
        )
        loss = (each * weight).sum() / weight.sum()
        if k:
            # Outlier exposure: cross-entropy to the uniform distribution over the classes.
            uniform = -F.log_softmax(others, dim=-1).mean(dim=-1).mean()
            loss = loss + self.cfg.outlier_weight * uniform
            self.log("train_outlier_loss", uniform)
        self.log("train_loss", loss, prog_bar=True)
        self.log("train_acc", (digits.argmax(-1) == y).float().mean())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits, _ = self.served()(x)
        self.log("val_loss", F.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(
            self.model.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay
        )
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.cfg.lr, total_steps=self.steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def with_redrawn(
    split: Split,
    copies: int,
    seed: int,
    glyph_images: int = 0,
    repeats: int = 1,
    font_images: int = 0,
) -> tuple[list[np.ndarray], np.ndarray]:
    """The split's digits (`repeats` times), `copies` redrawn large images of each,
    `glyph_images` synthetic glyphs and `font_images` typeset digits (augment.py), with labels."""
    images, labels = augmented(split.greys, split.labels, copies, seed, glyph_images, font_images)
    own = [*split.greys] * repeats
    return [*own, *images], np.concatenate([np.tile(split.labels, repeats), labels])


def redrawn_splits(cfg: TrainConfig, splits: dict[str, Split]) -> dict[str, tuple]:
    """Training's images (seeded by the torch seed) and the selection split's (validation: its
    digits, their redrawn copies, glyphs and typeset digits, seeded by selection_seed)."""
    return {
        "train": with_redrawn(
            splits["train"],
            cfg.redrawn_copies,
            cfg.torch_seed,
            cfg.glyph_images,
            cfg.dataset_repeats,
            cfg.font_images,
        ),
        # The selection split: the same images whatever the torch seed (selection_seed).
        "val": with_redrawn(
            splits["val"],
            cfg.selection_copies,
            cfg.selection_seed,
            cfg.glyph_images // 9,
            font_images=cfg.font_images // 9,
        ),
    }


def loader(
    images: tuple[list[np.ndarray], np.ndarray],
    export: ImageExport,
    batch: int,
    shuffle: bool,
    seed: int,
    weight: np.ndarray | None = None,
) -> DataLoader:
    """Batches of (inputs, labels), with each image's loss weight third when `weight` is given."""
    x = torch.from_numpy(model_batch(images[0], export))
    tensors = [x, torch.from_numpy(images[1])]
    if weight is not None:
        tensors.append(torch.from_numpy(weight))
    data = TensorDataset(*tensors)
    return DataLoader(data, batch_size=batch, shuffle=shuffle,
                      generator=torch.Generator().manual_seed(seed))  # fmt: skip


def train(
    cfg: TrainConfig,
    splits: dict[str, Split],
    export: ImageExport,
    opts: TrainerOptions | None = None,
    out: Path | None = None,
    logger=None,
    progress: bool = True,
) -> tuple[torch.nn.Module, int]:
    """Fit (one-cycle LR, redrawn copies and shift augmentation, early stopping on validation loss, checkpoints under
    out/checkpoints); returns the model on the CPU in eval mode and the optimizer steps taken."""
    opts = opts or TrainerOptions()
    L.seed_everything(cfg.torch_seed, verbose=False)
    images = redrawn_splits(cfg, splits)
    own = len(splits["train"].labels) * cfg.dataset_repeats  # with_redrawn puts them first
    weight = np.ones(len(images["train"][1]), np.float32)
    weight[:own] = cfg.dataset_weight
    fit = loader(images["train"], export, cfg.batch_size, True, cfg.torch_seed, weight)
    val = loader(images["val"], export, 2048, False, cfg.torch_seed)
    steps = cfg.epochs * len(fit)
    module = DigitsModule(cfg, export, steps)
    stop = EarlyStopping("val_loss", patience=cfg.patience, mode="min")
    with tempfile.TemporaryDirectory() as tmp:
        root = out if out is not None else Path(tmp)
        trainer = build_trainer(opts, root, max_steps=steps, progress=progress, logger=logger,
                                callbacks=[stop])  # fmt: skip
        trainer.fit(module, fit, val, ckpt_path=checkpoint_path(root, opts))
    return module.served().cpu().float().eval(), int(trainer.global_step)


def outputs_of(
    model: torch.nn.Module, greys: np.ndarray | list[np.ndarray], export: ImageExport
) -> tuple[np.ndarray, np.ndarray]:
    """Eager (logits, features) of grey images, through the serving code's pixels."""
    with torch.inference_mode():
        logits, features = model(torch.from_numpy(model_batch(greys, export)))
    return logits.numpy(), features.numpy()


def logits_of(
    model: torch.nn.Module, greys: np.ndarray | list[np.ndarray], export: ImageExport
) -> np.ndarray:
    return outputs_of(model, greys, export)[0]
