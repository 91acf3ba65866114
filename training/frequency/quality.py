"""The model on held-out signals of the served family, in both served modes: the quality floors.

Signals: `cfg.eval_signals` draws of handlers/frequency/family.SERVED, `cfg.eval_samples` each,
from a seed training never draws from. Each mode runs through the functions the handler runs
(handlers/frequency/lockin.py) with the eager model in place of the exported graph:

- windows: half-overlapping windows, each read forward and backward, blended, stitched with the
  Hann taper (the one-shot answer);
- stream: the whole signal as one stream from a zero state, chunk by chunk (`STREAM_CHUNK`
  samples, as a client streams it); each sample answered by the last block completed before it.

Figures, per mode: `median_r` and `p10_r` (correlation of a present component's answer with its
truth over the whole signal, its first samples included), `absent_ratio` (median over (signal,
absent frequency) of the answer's RMS over the mean RMS of the present components' truths), and
`band_coverage`: the share of true samples (every frequency, present or absent, every sample)
inside the served answer +-2 std.

The band: the head's exact dropout std (handlers/frequency/lockin.band_terms) is no calibrated
error bar by itself (on the first recipe's held-out signals +-2 std held 0.98 of the truth in
windows and 0.77 in streams). `calibrate` fits one factor per mode on held-out signals of their
own seed (`cfg.calib_seed`), like temperature scaling: the quantile of |truth - answer| / (2 std)
at `cfg.band_nominal` (split-conformal), so +-2 x factor x std holds that share of the
calibration truth; the export carries the factors (FrequencyExport.band_scale) and the engine
serves std x factor. A stream's factor depends on how much of it has been read (one per 100
samples of its first 2 s): early in a stream the answer errs far more than the dropout std says. The test signals then measure the coverage the floors hold.
"""

from __future__ import annotations

import numpy as np
import torch

from handlers.frequency.family import SERVED
from handlers.frequency.lockin import Carried, read_windows, stream_answer, stream_chunk
from handlers.frequency.settings import BandScale
from handlers.kits.signal.windowing import split, stitch
from training.frequency.config import TrainConfig
from training.frequency.data import Drawn, draw_many
from training.frequency.model import FrequencyLSTM, SequenceGraph, StepGraph

MODES = ("windows", "stream")
STREAM_CHUNK = 100
"""Samples per chunk of the measured streams (any split gives the same answer)."""
HANN = 1.0
EARLY = 500
"""Samples of a signal's start whose coverage is reported apart (half a second at 1 kHz)."""
"""The stitching taper's skew: symmetric, since each window is read in both directions."""


def held_out(cfg: TrainConfig, seed: int, count: int | None = None) -> Drawn:
    return draw_many(SERVED, np.random.default_rng(seed), count or cfg.eval_signals,
                     cfg.eval_samples)  # fmt: skip


def _runner(model: FrequencyLSTM):
    graph = SequenceGraph(model).eval()

    def run(x: np.ndarray):
        with torch.inference_mode():
            iq, hidden = graph(torch.from_numpy(x))
        return iq.numpy(), hidden.numpy()

    return run


def windows_mode(model: FrequencyLSTM, cfg: TrainConfig, signal: np.ndarray, selectors):
    """One signal, the selected frequencies: answers and bands (F, N), as the handler answers."""
    n = signal.shape[0]
    hop = cfg.window // 2
    win = split(signal.astype(np.float64), cfg.window, hop)
    lengths = np.minimum(cfg.window, n - np.arange(win.shape[0]) * hop)
    f = len(selectors)
    rows = np.concatenate([win] * f)
    lens = np.concatenate([lengths] * f)
    sel = np.repeat(np.asarray(selectors), win.shape[0])
    head = model.out.weight.detach().numpy()
    out, std = read_windows(rows, lens, sel, cfg.signal.frequencies, cfg.signal.sample_rate,
                            cfg.block, _runner(model), head, model.dropout.p)  # fmt: skip
    pieces = np.stack([out, std], axis=-1).reshape(f, win.shape[0], cfg.window, 2)
    both = stitch(pieces.transpose(1, 2, 0, 3), n, hop, HANN)  # (N, F, 2)
    return both[..., 0].T, both[..., 1].T


def stream_mode(model: FrequencyLSTM, cfg: TrainConfig, signal: np.ndarray, selectors,
                chunk: int = STREAM_CHUNK):  # fmt: skip
    """One signal as a stream from a zero state, chunk by chunk: answers and bands (F, N)."""
    f = len(selectors)
    step = StepGraph(model).eval()
    head = model.out.weight.detach().numpy()
    h = torch.zeros(model.lstm.num_layers, f, model.lstm.hidden_size)
    c = torch.zeros_like(h)
    carried = Carried(0, 0.0, np.zeros((f, 2), dtype=np.float32))
    outs, stds = [], []
    x = signal.astype(np.float64)
    for lo in range(0, x.shape[0], chunk):
        feats, prepared = stream_chunk(x[lo : lo + chunk], carried, selectors,
                                       cfg.signal.frequencies, cfg.signal.sample_rate, cfg.block)  # fmt: skip
        held = h[-1].numpy().copy()
        if feats.shape[1]:
            with torch.inference_mode():
                iq, hidden, h, c = step(torch.from_numpy(feats), h, c)
            iq, hidden = iq.numpy(), hidden.numpy()
        else:
            iq = np.zeros((f, 0, 2), dtype=np.float32)
            hidden = np.zeros((f, 0, model.lstm.hidden_size), dtype=np.float32)
        out, std = stream_answer(iq, hidden, held, prepared, head, model.dropout.p)
        outs.append(out)
        stds.append(std)
        carried = prepared[-1]
    return np.concatenate(outs, axis=1), np.concatenate(stds, axis=1)


def extract(model: FrequencyLSTM, cfg: TrainConfig, drawn: Drawn, mode: str):
    """Every signal, every frequency: answers and bands (S, F, N)."""
    sel = tuple(range(len(cfg.signal.frequencies)))
    fn = windows_mode if mode == "windows" else stream_mode
    pairs = [fn(model, cfg, x, sel) for x in drawn.mixed]
    return np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs])


def scores(out: np.ndarray, truth: np.ndarray) -> dict:
    """Correlations of present components and RMS ratios of absent ones → the mode's figures."""
    rs: list[float] = []
    absent: list[float] = []
    rms = np.sqrt(np.mean(truth.astype(np.float64) ** 2, axis=-1))  # (S, F)
    for k in range(out.shape[0]):
        present = rms[k] > 0
        for i in range(out.shape[1]):
            if present[i]:
                o = out[k, i]
                rs.append(float(np.corrcoef(o, truth[k, i])[0, 1]) if o.std() > 0 else 0.0)
            else:
                absent.append(float(np.sqrt(np.mean(out[k, i] ** 2)) / rms[k][present].mean()))
    return {
        "median_r": float(np.median(rs)),
        "p10_r": float(np.percentile(rs, 10)),
        "min_r": float(np.min(rs)),
        "present_components": len(rs),
        "absent_ratio": float(np.median(absent)) if absent else 0.0,
        "absent_ratio_p90": float(np.percentile(absent, 90)) if absent else 0.0,
        "absent_components": len(absent),
    }


def per_signal(out: np.ndarray, truth: np.ndarray) -> list[dict]:
    """Each signal's figures, per component (`scores` pools them): the correlation of a present
    component with its truth, the RMS ratio of an absent one (None where the other applies)."""
    items = []
    rms = np.sqrt(np.mean(truth.astype(np.float64) ** 2, axis=-1))
    for k in range(out.shape[0]):
        present = rms[k] > 0
        r: list[float | None] = []
        ratio: list[float | None] = []
        for i in range(out.shape[1]):
            o = out[k, i]
            if present[i]:
                r.append(float(np.corrcoef(o, truth[k, i])[0, 1]) if o.std() > 0 else 0.0)
                ratio.append(None)
            else:
                r.append(None)
                ratio.append(float(np.sqrt(np.mean(o**2)) / rms[k][present].mean()))
        items.append({"id": k, "r": r, "absent_ratio": ratio})
    return items


def coverage(out: np.ndarray, std: np.ndarray, truth: np.ndarray) -> float:
    """Share of samples whose truth lies within the answer +-2 std."""
    return float(np.mean(np.abs(truth - out) <= 2 * std))


def fit_band_scale(out: np.ndarray, std: np.ndarray, truth: np.ndarray, nominal: float) -> float:
    """The factor s for which `nominal` of the samples have |truth - out| <= 2 s std: the
    quantile of their ratios (rounded up to a sample's). Samples with std 0 (a stream's first
    block answers 0 from the zero state, with no spread) no factor covers; they are left out."""
    err = np.abs(truth.astype(np.float64) - out)
    spread = 2 * std.astype(np.float64)
    ratio = err[spread > 0] / spread[spread > 0]
    if not ratio.size:
        return 1.0
    return float(max(np.quantile(ratio, nominal, method="higher"), 1e-6))


def fit_factors(out: np.ndarray, std: np.ndarray, truth: np.ndarray, nominal: float,
                step: int, buckets: int) -> tuple[float, ...]:  # fmt: skip
    """One factor per `step` samples of (..., N) answers, `buckets` of them, the last fitted on
    every sample from there to the end."""
    n = out.shape[-1]
    factors = []
    for b in range(buckets):
        lo, hi = b * step, (n if b == buckets - 1 else (b + 1) * step)
        if lo >= n:
            break
        part = (out[..., lo:hi], std[..., lo:hi], truth[..., lo:hi])
        factors.append(fit_band_scale(*part, nominal))
    return tuple(factors)


def calibrate(model: FrequencyLSTM, cfg: TrainConfig) -> BandScale:
    """The band's factors (FrequencyExport.band_scale), fitted on `cfg.calib_signals` held-out
    served-family signals of `cfg.calib_seed`: one for the one-shot answer, whose band is as
    good at every sample (each is read forward and backward), and one per `cfg.band_step`
    samples of a stream's first `cfg.band_stream_buckets` x `cfg.band_step` (a stream that has
    read little errs more than its dropout std says), the last holding on."""
    model = model.eval()
    drawn = held_out(cfg, cfg.calib_seed, cfg.calib_signals)
    tables = {}
    for mode, buckets in (("windows", 1), ("stream", cfg.band_stream_buckets)):
        out, std = extract(model, cfg, drawn, mode)
        tables[mode] = fit_factors(out, std, drawn.components, cfg.band_nominal, cfg.band_step,
                                   buckets)  # fmt: skip
    return BandScale(cfg.band_step, tables["windows"], tables["stream"])


def quality(model: FrequencyLSTM, cfg: TrainConfig, seed: int | None = None,
            count: int | None = None, band_scale: BandScale | None = None,
            items: list | None = None) -> dict:  # fmt: skip
    """Both modes' figures on held-out served-family signals (`cfg.test_seed` unless given), the
    band's coverage with the fitted factors (None: the raw dropout std), as served. `items`: gets
    the windows mode's per-signal figures (`per_signal`), the one-shot answers check-served asks."""
    model = model.eval()
    drawn = held_out(cfg, cfg.test_seed if seed is None else seed, count)
    report: dict = {"signals": int(drawn.mixed.shape[0]), "samples": int(drawn.mixed.shape[1])}
    for mode in MODES:
        out, std = extract(model, cfg, drawn, mode)
        n = out.shape[-1]
        factors = np.ones(n) if band_scale is None else band_scale.factors(mode, 0, n)
        report[mode] = scores(out, drawn.components)
        if items is not None and mode == "windows":
            items.extend(per_signal(out, drawn.components))
        report[mode]["band_coverage"] = coverage(out, std * factors, drawn.components)
        report[mode]["band_coverage_raw"] = coverage(out, std, drawn.components)
        # The first half second, where a stream has read least, apart.
        early = slice(0, min(n, EARLY))
        report[mode]["band_coverage_first_500"] = coverage(
            out[..., early], (std * factors)[..., early], drawn.components[..., early]
        )
    return report


def figures(report: dict) -> dict[str, float]:
    """The extraction's floored figures, flat (TrainConfig.floors names them)."""
    return {f"{mode}_{k}": report[mode][k] for mode in MODES
            for k in ("median_r", "p10_r", "absent_ratio")}  # fmt: skip


def band_figures(report: dict) -> dict[str, float]:
    """The band's floored figures (measured with the fitted factors), flat."""
    flat = {}
    for mode in MODES:
        flat[f"{mode}_band_coverage"] = report[mode]["band_coverage"]
        flat[f"{mode}_band_outside"] = 1.0 - report[mode]["band_coverage"]
    return flat
