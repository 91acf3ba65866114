"""The network, its Lightning training and its export.

The MLP takes records as the tabular kit encodes them (handlers/kits/tabular/schema.py: each number where
it lies in its training range, clipped `margin` ranges past it; categories one-hot) and returns
(logits, features): the features feed the dropout → linear head, which serving samples for
MC-dropout spread from head.npz. Outlier exposure teaches it to be unsure outside the ranges seen:
each batch carries training records with one to three features moved out there, trained toward
the uniform distribution, so a record far outside (clipped to the margin) gets a high entropy.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import EarlyStopping
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from handlers.kits.tabular.settings import TabularExport
from handlers.runtime import RUNTIME_FILES, load_runtime
from handlers.uncertainty import MLPHead
from training.common.parity import ParityCase, check_parity
from training.common.trainer import TrainerOptions, build_trainer, checkpoint_path
from training.tabular.config import TrainConfig

INPUT_NAME, OUTPUT_NAME, FEATURES_NAME = "record", "logits", "features"
FILES = ("model.pt", "model.onnx", "head.npz", "distance.npz")
ATOL = 1e-4


class TabularMLP(nn.Module):
    def __init__(self, width: int, hidden: int, classes: int, dropout: float):
        super().__init__()
        self.features = nn.Sequential(
            nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden, hidden), nn.ReLU(),
        )  # fmt: skip
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, classes)

    def forward(self, record: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(record)
        return self.out(self.dropout(features)), features


def mlp_head(model: TabularMLP) -> MLPHead:
    """The dropout → linear head as numpy arrays (head.npz) for handlers.uncertainty."""
    return MLPHead(
        weights=(model.out.weight.detach().cpu().numpy().astype(np.float32),),
        biases=(model.out.bias.detach().cpu().numpy().astype(np.float32),),
        activations=("none",),
        dropout=float(model.dropout.p),
    )


def moved_out(x: torch.Tensor, margin: float, generator: torch.Generator) -> torch.Tensor:
    """Copies of encoded records with one to three number columns moved outside the range seen:
    a quarter of a range past it up to the clip at `margin`, above or below."""
    x = x.clone()
    n, width = x.shape
    for k in range(1, 4):
        rows = torch.arange(n)[torch.randint(0, 3, (n,), generator=generator) >= k - 1]
        cols = torch.randint(0, width, (len(rows),), generator=generator)
        size = 0.25 + (margin - 0.25) * torch.rand(len(rows), generator=generator)
        above = torch.rand(len(rows), generator=generator) < 0.5
        x[rows, cols] = torch.where(above, 1.0 + size, -size)
    return x


class TabularModule(L.LightningModule):
    def __init__(self, cfg: TrainConfig, width: int, classes: int, steps: int):
        super().__init__()
        self.cfg, self.steps = cfg, steps
        torch.manual_seed(cfg.torch_seed)
        self.model = TabularMLP(width, cfg.hidden, classes, cfg.dropout)
        self.generator = torch.Generator().manual_seed(cfg.torch_seed)

    def training_step(self, batch, batch_idx):
        x, y = batch
        k = int(round(self.cfg.outlier_fraction * len(x))) if self.cfg.outlier_weight > 0 else 0
        if k:
            x = torch.cat([x, moved_out(x[:k].cpu(), self.cfg.margin, self.generator).to(x)])
        logits, _ = self.model(x)
        loss = F.cross_entropy(logits[: len(y)], y)
        if k:
            uniform = -F.log_softmax(logits[len(y) :], dim=-1).mean()
            loss = loss + self.cfg.outlier_weight * uniform
            self.log("train_outlier_loss", uniform)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits, _ = self.model(x)
        self.log("val_loss", F.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(
            self.model.parameters(), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay
        )
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.cfg.lr, total_steps=self.steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def fit(
    cfg: TrainConfig,
    data: dict[str, tuple[np.ndarray, np.ndarray]],
    classes: int,
    opts: TrainerOptions | None = None,
    out: Path | None = None,
    logger=None,
    progress: bool = True,
) -> tuple[TabularMLP, int]:
    """Train on encoded (x, y) splits; the model on the CPU in eval mode and the steps taken."""
    opts = opts or TrainerOptions()
    L.seed_everything(cfg.torch_seed, verbose=False)
    x, y = (torch.from_numpy(a) for a in data["train"])
    loader = DataLoader(TensorDataset(x, y), batch_size=cfg.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(cfg.torch_seed))  # fmt: skip
    val = DataLoader(TensorDataset(*(torch.from_numpy(a) for a in data["val"])), batch_size=1024)
    steps = cfg.epochs * len(loader)
    module = TabularModule(cfg, x.shape[1], classes, steps)
    stop = EarlyStopping("val_loss", patience=cfg.patience, mode="min")
    with tempfile.TemporaryDirectory() as tmp:
        root = out if out is not None else Path(tmp)
        trainer = build_trainer(opts, root, max_steps=steps, progress=progress, logger=logger,
                                callbacks=[stop])  # fmt: skip
        trainer.fit(module, loader, val, ckpt_path=checkpoint_path(root, opts))
    return module.model.cpu().float().eval(), int(trainer.global_step)


def outputs_of(model: nn.Module, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with torch.inference_mode():
        logits, features = model(torch.from_numpy(np.asarray(x, np.float32)))
    return logits.numpy(), features.numpy()


def export_all(model: TabularMLP, export: TabularExport, out: Path, sample: np.ndarray) -> dict:
    """model.pt (TorchScript), model.onnx and head.npz into `out`, gated on parity with eager at
    batch sizes the export never saw (or ParityError before any manifest exists)."""
    name, output, features = export.input_name, export.output_name, export.features_name
    width = export.schema.width
    torch.jit.script(model).save(str(out / RUNTIME_FILES["torchscript"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter warns that it is legacy
        torch.onnx.export(
            model, (torch.zeros(2, width),), str(out / RUNTIME_FILES["onnx"]),
            input_names=[name], output_names=[output, features],
            dynamic_axes={name: {0: "batch"}, output: {0: "batch"}, features: {0: "batch"}},
            opset_version=17, dynamo=False,
        )  # fmt: skip
    head = mlp_head(model)
    head.save(out / export.head)

    def eager(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        logits, feats = outputs_of(model, inputs[name])
        return {output: logits, features: feats}

    def numpy_head(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feats = eager(inputs)[features]
        return {output: head.forward(feats), features: feats}

    rng = np.random.default_rng(123)
    m = export.schema.margin
    cases = [
        ParityCase(f"uniform batch={b}", {name: rng.uniform(-m, 1 + m, (b, width)).astype(np.float32)})
        for b in (1, 7)
    ] + [ParityCase(f"records batch={len(sample)}", {name: sample})]  # fmt: skip
    runtimes = {
        kind: load_runtime(kind, out, (name,), (output, features), threads=1).run
        for kind in ("torchscript", "onnx")
    }
    runtimes["mlp_head"] = numpy_head
    return check_parity(eager, runtimes, cases, ATOL)
