"""Training loop: (I, Q) per block, on fresh windows and on carried streams.

One set of weights serves two modes, so every batch trains both: `fresh` rows are windows of
newly drawn training-family signals read from a zero state (what the windowed mode serves, in
either direction), `stream` rows walk through long signals one window at a time, carrying (h, c)
between optimizer steps (truncated BPTT: the state is detached, so a step still
back-propagates through one window only). Without the stream rows the state drifts once a stream
runs past the window length the model was trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import EarlyStopping
from torch.utils.data import DataLoader

from handlers.frequency.family import SERVED
from training.common.trainer import TrainerOptions, build_trainer, checkpoint_path
from training.frequency.config import TrainConfig
from training.frequency.data import Drawn, draw_many, rows, stream_tables
from training.frequency.model import FrequencyLSTM


def train_signals(cfg: TrainConfig) -> Drawn:
    """The long signals the carried streams walk through (the train seed picks them all)."""
    n = int(round(cfg.signal.duration_s * cfg.signal.sample_rate))
    return draw_many(cfg.family, np.random.default_rng(cfg.train_seed), cfg.train_signals, n)


class Streams:
    """`rows` streams, each one (signal, frequency) read a window of blocks at a time.

    Positions live here; the carried (h, c) live in the LightningModule (buffers on its device):
    `next` says which rows restarted, and their state is zeroed there. A stream starts at its
    signal's first block (its inputs are scaled from there)."""

    def __init__(self, x: np.ndarray, y: np.ndarray, rows: int, blocks: int,
                 rng: np.random.Generator):  # fmt: skip
        self.x, self.y, self.blocks, self.rng = x, y, blocks, rng
        """x (S, F, NB, 2 + F), y (S, F, NB, 2): stream_tables."""
        self.which = np.zeros(rows, dtype=np.int64)
        self.sel = np.zeros(rows, dtype=np.int64)
        self.pos = np.zeros(rows, dtype=np.int64)
        total = x.shape[2]
        for r in range(rows):
            self._restart(r)
            # Staggered so the batch holds streams at every age, not all just restarted together.
            self.pos[r] = rng.integers(0, max(total // blocks, 1)) * blocks

    def _restart(self, r: int) -> None:
        self.which[r] = self.rng.integers(0, self.x.shape[0])
        self.sel[r] = self.rng.integers(0, self.x.shape[1])
        self.pos[r] = 0

    def next(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next window of every stream: inputs (R, T, 2+F), targets (R, T, 2), restarted (R,)."""
        count, w = self.pos.shape[0], self.blocks
        x = np.empty((count, w, self.x.shape[-1]), dtype=np.float32)
        y = np.empty((count, w, 2), dtype=np.float32)
        restarted = np.zeros(count, dtype=bool)
        for r in range(count):
            if self.pos[r] + w > self.x.shape[2]:
                self._restart(r)
                restarted[r] = True
            p = self.pos[r]
            x[r] = self.x[self.which[r], self.sel[r], p : p + w]
            y[r] = self.y[self.which[r], self.sel[r], p : p + w]
            self.pos[r] += w
        return x, y, restarted

    def state_dict(self) -> dict:
        # Plain lists: checkpoints load with torch.load(weights_only=True), which refuses numpy.
        return {"which": self.which.tolist(), "sel": self.sel.tolist(), "pos": self.pos.tolist()}

    def load_state_dict(self, state: dict) -> None:
        self.which, self.sel, self.pos = (
            np.asarray(state[k]).copy() for k in ("which", "sel", "pos")
        )


def fresh_rows(cfg: TrainConfig, count: int, rng: np.random.Generator, family=None):
    """`count` newly drawn signals of one window, each with a random frequency: inputs, targets."""
    drawn = draw_many(family or cfg.family, rng, count, cfg.window)
    sel = rng.integers(0, len(cfg.signal.frequencies), size=count)
    return rows(drawn, sel, cfg.signal.frequencies, cfg.signal.sample_rate, cfg.block)


def build_model(cfg: TrainConfig) -> FrequencyLSTM:
    return FrequencyLSTM(len(cfg.signal.frequencies), cfg.hidden, cfg.layers, cfg.head_dropout,
                         cfg.arch, cfg.attention_heads)  # fmt: skip


class FrequencyModule(L.LightningModule):
    """One step = `fresh` zero-state windows (sequence path) + the next window of each carried
    stream (step path); the data is drawn here, from the module's seeded generator, because the
    streams' state is the model's own output. Checkpoints carry the generator and stream positions,
    so a resumed run draws what the interrupted one would have."""

    def __init__(self, cfg: TrainConfig, signals: Drawn):
        super().__init__()
        self.cfg = cfg
        torch.manual_seed(cfg.torch_seed)
        self.model = build_model(cfg)
        self.rng = np.random.default_rng(cfg.torch_seed)
        self.stream_rows = int(round(cfg.batch_size * cfg.stream_fraction))
        self.fresh_rows = cfg.batch_size - self.stream_rows
        x, y = stream_tables(signals, cfg.signal.frequencies, cfg.signal.sample_rate, cfg.block)
        self.streams = Streams(x, y, self.stream_rows, cfg.window // cfg.block, self.rng)
        state = (cfg.layers, self.stream_rows, cfg.hidden)
        self.register_buffer("stream_h", torch.zeros(state))
        self.register_buffer("stream_c", torch.zeros(state))

    def training_step(self, step, batch_idx):
        xf, yf = fresh_rows(self.cfg, self.fresh_rows, self.rng)
        xs, ys, restarted = self.streams.next()
        keep = torch.from_numpy(~restarted).to(self.stream_h).view(1, -1, 1)
        out_f, _ = self.model.sequence(self._tensor(xf))
        out_s, _, hn, cn = self.model(self._tensor(xs), self.stream_h * keep, self.stream_c * keep)
        # Truncated BPTT: the carried state is detached, a step back-propagates one window only.
        self.stream_h, self.stream_c = hn.detach(), cn.detach()
        err = torch.cat([((out_f.float() - self._tensor(yf)) ** 2).flatten(),
                         ((out_s.float() - self._tensor(ys)) ** 2).flatten()])  # fmt: skip
        loss = err.mean()
        self.log("train_mse", loss, prog_bar=True)
        return loss

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        # Drawn inside the step (the streams depend on the model's state): put it where the model is.
        return torch.from_numpy(a).to(self.device)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        out, _ = self.model.sequence(x)
        self.log("val_mse", torch.mean((out.float() - y) ** 2), prog_bar=True)

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.model.parameters(), lr=self.cfg.lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=self.cfg.lr, total_steps=self.cfg.steps
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["data"] = {
            "rng": self.rng.bit_generator.state,
            "streams": self.streams.state_dict(),
        }

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        self.rng.bit_generator.state = checkpoint["data"]["rng"]
        self.streams.load_state_dict(checkpoint["data"]["streams"])


def validation_windows(cfg: TrainConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Served-family windows of the validation seed, every frequency: inputs and (I, Q) targets."""
    drawn = draw_many(SERVED, np.random.default_rng(cfg.val_seed), 32, cfg.window)
    xs, ys = [], []
    for i in range(len(cfg.signal.frequencies)):
        x, y = rows(drawn, np.full(32, i), cfg.signal.frequencies, cfg.signal.sample_rate,
                    cfg.block)  # fmt: skip
        xs.append(x)
        ys.append(y)
    return torch.from_numpy(np.concatenate(xs)), torch.from_numpy(np.concatenate(ys))


def train(
    cfg: TrainConfig,
    signals: Drawn,
    opts: TrainerOptions | None = None,
    out: Path | None = None,
    logger=None,
    progress: bool = True,
    callbacks: list | None = None,
) -> tuple[FrequencyLSTM, int]:
    """Fit with Lightning (clip, one-cycle LR, early stopping on the validation signal's MSE,
    checkpoints under out/checkpoints); returns the model on the CPU in eval mode, for export,
    and the optimizer steps taken (fewer than cfg.steps when early stopping fired)."""
    import tempfile

    opts = opts or TrainerOptions()
    L.seed_everything(cfg.torch_seed, verbose=False)
    module = FrequencyModule(cfg, signals)
    # The step index is all the loader carries; the batch itself is drawn in training_step.
    indices: Any = range(cfg.steps)
    steps: DataLoader = DataLoader(indices, batch_size=None)
    windows: Any = [validation_windows(cfg)]
    val: DataLoader = DataLoader(windows, batch_size=None)
    stop = EarlyStopping("val_mse", patience=cfg.patience, mode="min")
    with tempfile.TemporaryDirectory() as tmp:
        root = out if out is not None else Path(tmp)
        trainer = build_trainer(opts, root, max_steps=cfg.steps, progress=progress, logger=logger,
                                callbacks=[stop, *(callbacks or [])], gradient_clip_val=cfg.clip,
                                val_check_interval=min(cfg.val_every, cfg.steps))  # fmt: skip
        trainer.fit(module, steps, val, ckpt_path=checkpoint_path(root, opts))
    return module.model.cpu().float().eval(), int(trainer.global_step)
