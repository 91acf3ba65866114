"""Training loop and evaluation: MSE per frequency on the train and test noise seeds.

One set of weights serves two modes, so every batch trains both: `fresh` rows are windows run from
a zero state (what the windowed mode serves), `stream` rows walk through whole signals one window
at a time, carrying (h, c) between optimizer steps (truncated BPTT: the state is detached, so a
step still back-propagates through one window only). Without the stream rows the state drifts
once a stream runs past the window length the model was trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import EarlyStopping
from torch.utils.data import DataLoader

from handlers.frequency.engine import head_std
from handlers.frequency.windowing import SKEW, split, stitch
from training.common.trainer import TrainerOptions, build_trainer, checkpoint_path
from training.frequency.config import TrainConfig
from training.frequency.data import Signal, make_signal, model_inputs, sample_windows
from training.frequency.model import FrequencyLSTM, SequenceGraph, StepGraph


def train_signals(cfg: TrainConfig) -> list[Signal]:
    # Several realisations from one seed: the train seed picks the whole family of noise draws.
    seeds = np.random.default_rng(cfg.train_seed).integers(0, 2**31, size=cfg.train_signals)
    return [make_signal(cfg.signal, int(s)) for s in seeds]


class Streams:
    """`rows` streams, each one (signal, frequency) read a window at a time.

    Positions live here; the carried (h, c) live in the LightningModule (buffers on its device):
    `next` says which rows restarted, and their state is zeroed there.
    """

    def __init__(self, signals: list[Signal], rows: int, window: int, rng: np.random.Generator):
        self.signals, self.window, self.rng = signals, window, rng
        self.num_f = signals[0].targets.shape[0]
        self.which = np.zeros(rows, dtype=np.int64)
        self.sel = np.zeros(rows, dtype=np.int64)
        self.pos = np.zeros(rows, dtype=np.int64)
        n = signals[0].mixed.shape[0]
        for r in range(rows):
            self._restart(r)
            # Staggered so the batch holds streams at every age, not all just restarted together.
            self.pos[r] = (
                rng.integers(0, (n - window) // window + 1) * window + self.pos[r] % window
            )

    def _restart(self, r: int) -> None:
        self.which[r] = self.rng.integers(0, len(self.signals))
        self.sel[r] = self.rng.integers(0, self.num_f)
        self.pos[r] = self.rng.integers(0, self.window)  # random phase of the window grid

    def next(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The next window of every stream: inputs (R, L, 1+F), targets (R, L), restarted (R,)."""
        rows, w = self.pos.shape[0], self.window
        x = np.empty((rows, w, 1 + self.num_f), dtype=np.float32)
        y = np.empty((rows, w), dtype=np.float32)
        restarted = np.zeros(rows, dtype=bool)
        for r in range(rows):
            s = self.signals[self.which[r]]
            if self.pos[r] + w > s.mixed.shape[0]:
                self._restart(r)
                restarted[r] = True
            p, sel = self.pos[r], int(self.sel[r])
            x[r] = model_inputs(s.mixed[p : p + w], sel, self.num_f)
            y[r] = s.targets[sel, p : p + w]
            self.pos[r] += w
        return x, y, restarted

    def state_dict(self) -> dict:
        # Plain lists: checkpoints load with torch.load(weights_only=True), which refuses numpy.
        return {"which": self.which.tolist(), "sel": self.sel.tolist(), "pos": self.pos.tolist()}

    def load_state_dict(self, state: dict) -> None:
        self.which, self.sel, self.pos = (
            np.asarray(state[k]).copy() for k in ("which", "sel", "pos")
        )


def loss_weights(cfg: TrainConfig) -> torch.Tensor:
    """(L,) weights of a zero-state window's samples: its first ones cannot know the phase yet."""
    ramp = np.clip((np.arange(cfg.window) + 1) / max(cfg.burn_in, 1), 0.0, 1.0)
    return torch.from_numpy(ramp.astype(np.float32))


def build_model(cfg: TrainConfig) -> FrequencyLSTM:
    return FrequencyLSTM(len(cfg.signal.frequencies), cfg.hidden, cfg.layers, cfg.head_dropout,
                         cfg.arch, cfg.attention_heads)  # fmt: skip


class FrequencyModule(L.LightningModule):
    """One step = `fresh` zero-state windows (sequence path) + the next window of each carried
    stream (step path); the data is drawn here, from the module's seeded generator, because the
    streams' state is the model's own output. Checkpoints carry the generator and stream positions,
    so a resumed run draws what the interrupted one would have."""

    def __init__(self, cfg: TrainConfig, signals: list[Signal]):
        super().__init__()
        self.cfg = cfg
        torch.manual_seed(cfg.torch_seed)
        self.model = build_model(cfg)
        self.rng = np.random.default_rng(cfg.torch_seed)
        self.stream_rows = int(round(cfg.batch_size * cfg.stream_fraction))
        self.fresh_rows = cfg.batch_size - self.stream_rows
        self.signals = signals
        self.streams = Streams(signals, self.stream_rows, cfg.window, self.rng)
        state = (cfg.layers, self.stream_rows, cfg.hidden)
        self.register_buffer("stream_h", torch.zeros(state))
        self.register_buffer("stream_c", torch.zeros(state))
        self.register_buffer("ramp", loss_weights(cfg))

    def training_step(self, step, batch_idx):
        cfg, fresh = self.cfg, self.fresh_rows
        xf, yf = sample_windows(self.signals, cfg.window, fresh, self.rng)
        xs, ys, restarted = self.streams.next()
        keep = torch.from_numpy(~restarted).to(self.stream_h).view(1, -1, 1)
        out_f, _ = self.model.sequence(self._tensor(xf))
        out_s, _, hn, cn = self.model(self._tensor(xs), self.stream_h * keep, self.stream_c * keep)
        # Truncated BPTT: the carried state is detached, a step back-propagates one window only.
        self.stream_h, self.stream_c = hn.detach(), cn.detach()
        # Fresh windows start from zero: ramp their loss in. Stream rows carry their state: full
        # weight (a restarted stream's first window is a fresh one too, a small bias accepted).
        err_f = (out_f.float() - self._tensor(yf)) ** 2
        err_s = (out_s.float() - self._tensor(ys)) ** 2
        loss = (err_f * self.ramp).sum() + err_s.sum()
        loss = loss / (fresh * self.ramp.sum() + self.stream_rows * cfg.window)
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
    """Non-overlapping zero-state windows of the validation signal, every frequency."""
    signal = make_signal(cfg.signal, cfg.val_seed)
    n = signal.mixed.shape[0] // cfg.window * cfg.window
    num_f = signal.targets.shape[0]
    x = np.concatenate(
        [model_inputs(signal.mixed[:n].reshape(-1, cfg.window), i, num_f) for i in range(num_f)]
    )
    y = np.concatenate([signal.targets[i, :n].reshape(-1, cfg.window) for i in range(num_f)])
    return torch.from_numpy(x), torch.from_numpy(y)


def train(
    cfg: TrainConfig,
    signals: list[Signal],
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


def predict_windows(model: FrequencyLSTM, signal: Signal, window: int, selector: int):
    """Non-overlapping windows, each from a zero state: the model's own per-window output."""
    n = signal.mixed.shape[0] // window * window
    x = model_inputs(signal.mixed[:n].reshape(-1, window), selector, signal.targets.shape[0])
    with torch.inference_mode():
        out, features = SequenceGraph(model)(torch.from_numpy(x))
    return out.numpy().reshape(-1), features.numpy().reshape(n, -1), signal.targets[selector, :n]


def predict_stitched(
    model: FrequencyLSTM, signal: Signal, cfg: TrainConfig, selector: int, masks, skew: float = SKEW
):
    """What the handler serves: half-overlapping windows blended with the taper, and the std."""
    hop = cfg.window // 2
    x = model_inputs(split(signal.mixed, cfg.window, hop), selector, signal.targets.shape[0])
    with torch.inference_mode():
        out, features = SequenceGraph(model)(torch.from_numpy(x))
    n = signal.mixed.shape[0]
    std = head_std(features.numpy(), model.head(), masks)
    return stitch(out.numpy(), n, hop, skew), stitch(std, n, hop, skew)


def predict_stream(model: FrequencyLSTM, signal: Signal, selector: int) -> np.ndarray:
    """The whole signal in one pass with the state carried: what the stateful mode serves."""
    x = model_inputs(signal.mixed[None], selector, signal.targets.shape[0])
    h0, c0 = model.zero_state(1)
    with torch.inference_mode():
        out, _, _, _ = StepGraph(model)(torch.from_numpy(x), h0, c0)
    return out.numpy()[0]


def error_by_position(model: FrequencyLSTM, signal: Signal, window: int) -> np.ndarray:
    """(F, window) MSE at each position of a zero-state window: how fast a window finds the phase."""
    rows = []
    for i in range(signal.targets.shape[0]):
        out, _, target = predict_windows(model, signal, window, i)
        rows.append(((out - target) ** 2).reshape(-1, window).mean(axis=0))
    return np.stack(rows)


def evaluate(model: FrequencyLSTM, signal: Signal, cfg: TrainConfig) -> dict:
    head = model.head()
    masks = head.masks(cfg.mc_samples, seed=0)
    rows = {}
    for i, f in enumerate(cfg.signal.frequencies):
        out, _, target = predict_windows(model, signal, cfg.window, i)
        served, std = predict_stitched(model, signal, cfg, i, masks)
        hann, _ = predict_stitched(model, signal, cfg, i, masks, skew=1.0)
        stream = predict_stream(model, signal, i)
        mse_window = float(np.mean((out - target) ** 2))
        mse_stitched = float(np.mean((served - signal.targets[i]) ** 2))
        rows[f"{f:g}Hz"] = {
            "mse_window": mse_window,
            "mse_stitched": mse_stitched,
            "stitched_to_window_ratio": mse_stitched / mse_window,
            # The same windows blended with the plain (symmetric) Hann taper: what the skew buys.
            "mse_stitched_symmetric_taper": float(np.mean((hann - signal.targets[i]) ** 2)),
            "mse_stateful": float(np.mean((stream - signal.targets[i]) ** 2)),
            "mean_std": float(std.mean()),
        }
    return rows
