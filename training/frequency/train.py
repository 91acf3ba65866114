"""Training loop and evaluation: MSE per frequency on the train and test noise seeds."""

from __future__ import annotations

import numpy as np
import torch
from tqdm import tqdm

from handlers.frequency.engine import head_std
from handlers.frequency.windowing import split, stitch
from training.frequency.config import TrainConfig
from training.frequency.data import Signal, make_signal, model_inputs, sample_windows
from training.frequency.model import FrequencyLSTM, SequenceGraph, StepGraph


def train_signals(cfg: TrainConfig) -> list[Signal]:
    # Several realisations from one seed: the train seed picks the whole family of noise draws.
    seeds = np.random.default_rng(cfg.train_seed).integers(0, 2**31, size=cfg.train_signals)
    return [make_signal(cfg.signal, int(s)) for s in seeds]


def train(cfg: TrainConfig, signals: list[Signal]) -> FrequencyLSTM:
    torch.manual_seed(cfg.torch_seed)
    rng = np.random.default_rng(cfg.torch_seed)
    model = FrequencyLSTM(len(cfg.signal.frequencies), cfg.hidden, cfg.layers, cfg.head_dropout)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps)
    model.train()
    bar = tqdm(range(cfg.steps), desc="train frequency LSTM", unit="step")
    for _ in bar:
        x, y = sample_windows(signals, cfg.window, cfg.batch_size, rng)
        h0, c0 = model.zero_state(cfg.batch_size)
        out, _, _, _ = model(torch.from_numpy(x), h0, c0)
        loss = torch.mean((out - torch.from_numpy(y)) ** 2)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
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


def predict_stitched(model: FrequencyLSTM, signal: Signal, cfg: TrainConfig, selector: int, masks):
    """What the handler serves: half-overlapping windows blended with the Hann taper, and the std."""
    hop = cfg.window // 2
    x = model_inputs(split(signal.mixed, cfg.window, hop), selector, signal.targets.shape[0])
    with torch.inference_mode():
        out, features = SequenceGraph(model)(torch.from_numpy(x))
    n = signal.mixed.shape[0]
    std = head_std(features.numpy(), model.head(), masks)
    return stitch(out.numpy(), n, hop), stitch(std, n, hop)


def predict_stream(model: FrequencyLSTM, signal: Signal, selector: int) -> np.ndarray:
    """The whole signal in one pass with the state carried: what the stateful mode serves."""
    x = model_inputs(signal.mixed[None], selector, signal.targets.shape[0])
    h0, c0 = model.zero_state(1)
    with torch.inference_mode():
        out, _, _, _ = StepGraph(model)(torch.from_numpy(x), h0, c0)
    return out.numpy()[0]


def evaluate(model: FrequencyLSTM, signal: Signal, cfg: TrainConfig) -> dict:
    head = model.head()
    masks = head.masks(cfg.mc_samples, seed=0)
    rows = {}
    for i, f in enumerate(cfg.signal.frequencies):
        out, _, target = predict_windows(model, signal, cfg.window, i)
        served, std = predict_stitched(model, signal, cfg, i, masks)
        stream = predict_stream(model, signal, i)
        mse_window = float(np.mean((out - target) ** 2))
        mse_stitched = float(np.mean((served - signal.targets[i]) ** 2))
        rows[f"{f:g}Hz"] = {
            "mse_window": mse_window,
            "mse_stitched": mse_stitched,
            "stitched_to_window_ratio": mse_stitched / mse_window,
            "mse_stateful": float(np.mean((stream - signal.targets[i]) ** 2)),
            "mean_std": float(std.mean()),
        }
    return rows
