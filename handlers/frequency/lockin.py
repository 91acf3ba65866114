"""The lock-in around the LSTM: what it reads, and how its answer becomes a sinusoid.

The served signals (handlers/frequency/family.py) are sums of 1, 3, 5 and 7 Hz components of
unknown amplitude and phase. A component is I*sin(theta) + Q*cos(theta) against the selected
frequency's reference oscillator theta = 2*pi*f*n/sample_rate (n: the sample's index since the
request or stream began), so extracting it means estimating two slowly varying numbers, I and Q
(zero when it is absent). The sample multiplied by the reference's sin and cos holds 2I and 2Q
plus the other components beating at 2-14 Hz; `block_features` averages these products over
blocks of `block` samples (20 at 1 kHz: 50 per second), and the LSTM reads one block per step,
so a 2 s window is 100 LSTM steps, not 2,000. The LSTM's head answers (I, Q) per block, and the
answer at each sample is I*sin + Q*cos at that sample's own phase (`compose`).

Scale: the model reads every sample divided by the running RMS of the signal so far (causal, so a
stream and a one-shot request of the same samples read the same numbers) and its answer is
multiplied back: an amplitude is only meaningful relative to the rest of the signal.

Both served modes use these functions, and training's quality figures use them too
(training/frequency/quality.py), so what is measured is what is served.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SCALE_FLOOR = 1e-12
"""A running RMS under this (a signal of zeros so far) is taken as this: the answer is then ~0."""


def running_scale(samples: np.ndarray, energy: float = 0.0, seen: int = 0) -> np.ndarray:
    """(..., N) → (..., N) float64: the RMS of every sample so far, this one included, continuing
    a stream that already saw `seen` samples of total energy `energy` (sum of squares)."""
    x = np.asarray(samples, dtype=np.float64)
    total = energy + np.cumsum(x * x, axis=-1)
    count = seen + np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    return np.maximum(np.sqrt(total / count), SCALE_FLOOR)


def reference(hz, index: np.ndarray, sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """sin and cos of the reference oscillator(s) `hz` ((R,) or a scalar) at sample `index`
    ((N,) or (R, N) int64). The phase is taken in whole periods first, exact at any index a stream
    reaches for whole-Hz frequencies."""
    f = np.asarray(hz, dtype=np.float64)
    idx = np.asarray(index, dtype=np.int64)
    if f.ndim == 1:
        f = f[:, None]  # one oscillator per row
    whole = np.mod(idx, sample_rate).astype(np.float64)
    cycles = np.mod(f * whole / sample_rate, 1.0) * (2 * np.pi)
    return np.sin(cycles), np.cos(cycles)


def one_hot(selectors, num_frequencies: int, blocks: int) -> np.ndarray:
    """(R,) selectors → (R, blocks, F) float32."""
    sel = np.asarray(selectors, dtype=np.int64).reshape(-1)
    x = np.zeros((sel.shape[0], blocks, num_frequencies), dtype=np.float32)
    x[np.arange(sel.shape[0]), :, sel] = 1.0
    return x


def block_features(products: np.ndarray, selectors, num_frequencies: int, block: int) -> np.ndarray:
    """(R, N, 2) scaled sample x reference products (N a multiple of `block`) → the LSTM's inputs
    (R, N / block, 2 + F): twice the block means (2I, 2Q plus the beats), then the one-hot
    selector."""
    r, n = products.shape[0], products.shape[1]
    means = products.reshape(r, n // block, block, 2).mean(axis=2) * 2.0
    return np.concatenate(
        [means.astype(np.float32), one_hot(selectors, num_frequencies, n // block)], axis=-1
    )


def window_inputs(
    windows: np.ndarray, lengths: np.ndarray, selectors, frequencies, sample_rate: int, block: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Windows (R, W) of raw samples, each `lengths[r]` long (zeros after) → LSTM inputs
    (R, W / block, 2 + F), the running scale (R, W), and the reference sin, cos (R, W), each
    window read from its own first sample (index 0: a window is a request of its own)."""
    r, w = windows.shape
    scale = running_scale(windows)
    hz = np.asarray(frequencies, dtype=np.float64)[np.asarray(selectors, dtype=np.int64)]
    # Every row starts at index 0: one oscillator row per distinct frequency, the same numbers.
    distinct, row_of = np.unique(hz, return_inverse=True)
    sin_d, cos_d = reference(distinct, np.arange(w), sample_rate)
    sin, cos = sin_d[row_of.reshape(-1)], cos_d[row_of.reshape(-1)]
    x = windows / scale
    x[np.arange(w)[None, :] >= lengths[:, None]] = 0.0
    products = np.stack([x * sin, x * cos], axis=-1)
    return block_features(products, selectors, len(frequencies), block), scale, sin, cos


def compose(iq: np.ndarray, sin: np.ndarray, cos: np.ndarray, block: int) -> np.ndarray:
    """(R, NB, 2) per-block (I, Q) → (R, NB * block) I*sin + Q*cos at each sample's phase."""
    rep = np.repeat(iq, block, axis=1)
    n = sin.shape[-1]
    return rep[:, :n, 0] * sin + rep[:, :n, 1] * cos


def band_terms(hidden: np.ndarray, weight: np.ndarray, dropout: float) -> np.ndarray:
    """Dropout before the (I, Q) head: the answer's variance at a sample is
    p/(1-p) * sum_j h_j^2 (w_Ij sin + w_Qj cos)^2 = a sin^2 + 2 b sin cos + c cos^2. (..., H)
    hidden states, (2, H) head weight → (..., 3) the terms (a, b, c)."""
    p = float(dropout)
    factor = p / (1.0 - p) if p < 1.0 else np.inf
    h2 = np.square(hidden, dtype=np.float64)
    w = weight.astype(np.float64)
    terms = np.stack([h2 @ (w[0] * w[0]), h2 @ (w[0] * w[1]), h2 @ (w[1] * w[1])], axis=-1)
    return terms * factor


def band(terms: np.ndarray, sin: np.ndarray, cos: np.ndarray, block: int) -> np.ndarray:
    """(R, NB, 3) band terms → (R, N) std at each sample's phase."""
    rep = np.repeat(terms, block, axis=1)
    n = sin.shape[-1]
    rep = rep[:, :n]
    var = rep[..., 0] * sin * sin + 2 * rep[..., 1] * sin * cos + rep[..., 2] * cos * cos
    return np.sqrt(np.maximum(var, 0.0))


def blend_weights(length: int, window: int, block: int) -> tuple[np.ndarray, np.ndarray]:
    """How much the forward and the backward pass over a window of `length` real samples are
    trusted at each of its `window` positions: the square of the blocks each has read."""
    pos = np.arange(window)
    fwd = (pos // block + 1).astype(np.float64)
    back = ((np.maximum(length - 1 - pos, 0)) // block + 1).astype(np.float64)
    return fwd * fwd, back * back


def reverse_rows(windows: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each row's first `lengths[r]` samples in reverse order, zeros after."""
    out = np.zeros_like(windows)
    for r, m in enumerate(lengths):
        out[r, :m] = windows[r, :m][::-1]
    return out


def read_windows(
    windows: np.ndarray,
    lengths: np.ndarray,
    selectors,
    frequencies,
    sample_rate: int,
    block: int,
    run,
    head_weight: np.ndarray,
    dropout: float,
    banded: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The sequence mode over windows (R, W) of raw samples, `lengths[r]` real each: every window
    read forward and backward (a reversed sum of sinusoids is one too) in one `run` call, the two
    answers blended by how much of the window each had read. `run` maps LSTM inputs (R', NB,
    2 + F) to ((I, Q) (R', NB, 2), hidden states (R', NB, H)). Returns answers and std bands
    (R, W) in the signal's units; `banded` (R,) bool: the rows whose band is computed (None: all),
    the others' band left zero (the answers do not depend on it)."""
    r, w = windows.shape
    both = np.concatenate([windows, reverse_rows(windows, lengths)])
    lens = np.concatenate([lengths, lengths])
    sel = np.concatenate([np.asarray(selectors), np.asarray(selectors)])
    x, scale, sin, cos = window_inputs(both, lens, sel, frequencies, sample_rate, block)
    iq, hidden = run(x)
    out = compose(iq, sin, cos, block) * scale
    rows = np.ones(r, dtype=bool) if banded is None else np.asarray(banded, dtype=bool)
    both_rows = np.concatenate([rows, rows])
    std = np.zeros_like(out)
    if both_rows.all():
        std = band(band_terms(hidden, head_weight, dropout), sin, cos, block) * scale
    elif both_rows.any():
        std[both_rows] = (
            band(band_terms(hidden[both_rows], head_weight, dropout),
                 sin[both_rows], cos[both_rows], block) * scale[both_rows]
        )  # fmt: skip
    fwd, back = out[:r], reverse_rows(out[r:], lengths)
    fwd_std, back_std = std[:r], reverse_rows(std[r:], lengths)
    answer = np.zeros((r, w))
    spread = np.zeros((r, w))
    for k, m in enumerate(lengths):
        wf, wb = blend_weights(int(m), w, block)
        total = wf + wb
        answer[k] = (fwd[k] * wf + back[k] * wb) / total
        if rows[k]:
            spread[k] = (fwd_std[k] * wf + back_std[k] * wb) / total
    return answer, spread


@dataclass(frozen=True)
class Carried:
    """What a stream carries between chunks besides the LSTM's (h, c)."""

    seen: int
    """Samples read so far: the reference's phase and the running scale continue from it."""
    energy: float
    """Sum of the squares of those samples (the running scale)."""
    acc: np.ndarray
    """(F, 2) sums of the scaled sample x reference products of the block in progress."""


def stream_chunk(
    chunk: np.ndarray, carried: Carried, selectors, frequencies, sample_rate: int, block: int
):
    """Prepare a stream's chunk: the LSTM inputs of the blocks it completes (F, K, 2 + F), and
    what `stream_answer` needs: (scale, sin, cos, which output answers each sample, the new
    carried state)."""
    n = chunk.shape[0]
    f = len(selectors)
    scale = running_scale(chunk, carried.energy, carried.seen)
    hz = np.asarray(frequencies, dtype=np.float64)[np.asarray(selectors, dtype=np.int64)]
    sin, cos = reference(hz, carried.seen + np.arange(n, dtype=np.int64), sample_rate)
    x = chunk / scale
    products = np.stack([x * sin, x * cos], axis=-1)  # (F, n, 2)
    pos = carried.seen % block
    ends = np.arange(block - pos - 1, n, block)
    cs = np.cumsum(products, axis=1)
    acc = carried.acc.astype(np.float64)
    if ends.size:
        at_ends = cs[:, ends]
        sums = np.diff(at_ends, axis=1, prepend=0.0)
        sums[:, 0] += acc
        new_acc = cs[:, -1] - cs[:, ends[-1]]
    else:
        sums = np.zeros((f, 0, 2))
        new_acc = acc + (cs[:, -1] if n else 0.0)
    feats = np.concatenate(
        [
            (sums * (2.0 / block)).astype(np.float32),
            one_hot(selectors, len(frequencies), ends.size),
        ],
        axis=-1,
    )
    which = (pos + np.arange(n)) // block  # 0: the output held from before the chunk
    carried_after = Carried(
        carried.seen + n,
        carried.energy + float(np.square(chunk, dtype=np.float64).sum()),
        new_acc.astype(np.float32),
    )
    return feats, (scale, sin, cos, which, carried_after)


def stream_signal(
    iq: np.ndarray, held_hidden: np.ndarray, prepared, head_weight: np.ndarray
) -> np.ndarray:
    """The chunk's answers (F, n) alone, without their band (`stream_answer`'s first half)."""
    scale, sin, cos, which, _ = prepared
    outs = np.concatenate([held_hidden[:, None] @ head_weight.T, iq], axis=1)
    per = outs[:, which]  # (F, n, 2)
    return (per[..., 0] * sin + per[..., 1] * cos) * scale


def stream_answer(
    iq: np.ndarray,
    hidden: np.ndarray,
    held_hidden: np.ndarray,
    prepared,
    head_weight: np.ndarray,
    dropout: float,
) -> tuple[np.ndarray, np.ndarray]:
    """The chunk's answers (F, n) and bands: each sample answered by the output of the last block
    completed before its own (`held_hidden` (F, H): the top layer's state before the chunk)."""
    scale, sin, cos, which, _ = prepared
    answer = stream_signal(iq, held_hidden, prepared, head_weight)
    states = np.concatenate([held_hidden[:, None].astype(np.float32), hidden], axis=1)
    terms = band_terms(states, head_weight, dropout)[:, which]
    var = terms[..., 0] * sin * sin + 2 * terms[..., 1] * sin * cos + terms[..., 2] * cos * cos
    return answer, np.sqrt(np.maximum(var, 0.0)) * scale
