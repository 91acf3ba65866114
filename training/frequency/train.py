"""Training loop and evaluation: MSE per frequency on the train and test noise seeds.

One set of weights serves two modes, so every batch trains both: `fresh` rows are windows run from
a zero state (what the windowed mode serves), `stream` rows walk through whole signals one window
at a time, carrying (h, c) between optimizer steps (truncated BPTT: the state is detached, so a
step still back-propagates through one window only). Without the stream rows the state drifts
once a stream runs past the window length the model was trained on.
"""

from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from handlers.frequency.engine import head_std
from handlers.frequency.windowing import SKEW, split, stitch
from training.frequency.config import TrainConfig
from training.frequency.data import Signal, make_signal, model_inputs, sample_windows
from training.frequency.model import FrequencyLSTM, SequenceGraph, StepGraph


def train_signals(cfg: TrainConfig) -> list[Signal]:
    # Several realisations from one seed: the train seed picks the whole family of noise draws.
    seeds = np.random.default_rng(cfg.train_seed).integers(0, 2**31, size=cfg.train_signals)
    return [make_signal(cfg.signal, int(s)) for s in seeds]


class Streams:
    """`rows` streams, each one (signal, frequency) read a window at a time with its state kept."""

    def __init__(self, signals: list[Signal], rows: int, window: int, hidden: int, layers: int,
                 rng: np.random.Generator):  # fmt: skip
        self.signals, self.window, self.rng = signals, window, rng
        self.num_f = signals[0].targets.shape[0]
        self.which = np.zeros(rows, dtype=np.int64)
        self.sel = np.zeros(rows, dtype=np.int64)
        self.pos = np.zeros(rows, dtype=np.int64)
        self.h = torch.zeros(layers, rows, hidden)
        self.c = torch.zeros(layers, rows, hidden)
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
        self.h[:, r] = 0.0
        self.c[:, r] = 0.0

    def next(self) -> tuple[np.ndarray, np.ndarray]:
        """The next window of every stream: inputs (R, L, 1+F), targets (R, L)."""
        rows, w = self.pos.shape[0], self.window
        x = np.empty((rows, w, 1 + self.num_f), dtype=np.float32)
        y = np.empty((rows, w), dtype=np.float32)
        for r in range(rows):
            s = self.signals[self.which[r]]
            if self.pos[r] + w > s.mixed.shape[0]:
                self._restart(r)
            p, sel = self.pos[r], int(self.sel[r])
            x[r] = model_inputs(s.mixed[p : p + w], sel, self.num_f)
            y[r] = s.targets[sel, p : p + w]
            self.pos[r] += w
        return x, y

    def keep(self, h: torch.Tensor, c: torch.Tensor) -> None:
        self.h, self.c = h.detach(), c.detach()


def loss_weights(cfg: TrainConfig) -> torch.Tensor:
    """(L,) weights of a zero-state window's samples: its first ones cannot know the phase yet."""
    ramp = np.clip((np.arange(cfg.window) + 1) / max(cfg.burn_in, 1), 0.0, 1.0)
    return torch.from_numpy(ramp.astype(np.float32))


def train(cfg: TrainConfig, signals: list[Signal]) -> FrequencyLSTM:
    torch.manual_seed(cfg.torch_seed)
    rng = np.random.default_rng(cfg.torch_seed)
    model = FrequencyLSTM(len(cfg.signal.frequencies), cfg.hidden, cfg.layers, cfg.head_dropout)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps)
    stream_rows = int(round(cfg.batch_size * cfg.stream_fraction))
    fresh_rows = cfg.batch_size - stream_rows
    streams = Streams(signals, stream_rows, cfg.window, cfg.hidden, cfg.layers, rng)
    ramp = loss_weights(cfg)
    model.train()
    bar = tqdm(range(cfg.steps), desc="train frequency LSTM", unit="step")
    for _ in bar:
        xf, yf = sample_windows(signals, cfg.window, fresh_rows, rng)
        xs, ys = streams.next()
        x = torch.from_numpy(np.concatenate([xf, xs]))
        y = torch.from_numpy(np.concatenate([yf, ys]))
        h0, c0 = model.zero_state(fresh_rows)
        h0, c0 = torch.cat([h0, streams.h], dim=1), torch.cat([c0, streams.c], dim=1)
        out, _, hn, cn = model(x, h0, c0)
        streams.keep(hn[:, fresh_rows:], cn[:, fresh_rows:])
        err = (out - y) ** 2
        # Fresh windows start from zero: ramp their loss in. Stream rows carry their state: full
        # weight (a restarted stream's first window is a fresh one too, a small bias accepted).
        loss = (err[:fresh_rows] * ramp).sum() + err[fresh_rows:].sum()
        loss = loss / (fresh_rows * ramp.sum() + stream_rows * cfg.window)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
        opt.step()
        sched.step()
        bar.set_postfix(mse=f"{loss.item():.4f}", refresh=False)
    return model.eval()


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
