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

import functools
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


def block_means(values: np.ndarray, block: int) -> np.ndarray:
    """(R, N) → (R, N / block) twice each block's mean. The sum runs from 0.0 through the block's
    samples in order, the order numpy's mean takes over the block axis of (R, N / block, block, 2)
    products: bitwise the same as that mean, without interleaving I and Q."""
    r, n = values.shape
    # (block, R, N / block): each block position's samples contiguous, added one after another.
    parts = np.ascontiguousarray(values.reshape(r, n // block, block).transpose(2, 0, 1))
    total = np.zeros((r, n // block))
    for k in range(block):
        total += parts[k]
    total /= block
    total *= 2.0
    return total


def _inputs(i: np.ndarray, q: np.ndarray, selectors, num_frequencies: int) -> np.ndarray:
    """(R, K) each, twice the block means of the I and Q products → the LSTM's inputs
    (R, K, 2 + F) float32: those, then the one-hot selector."""
    r, k = i.shape
    out = np.zeros((r, k, 2 + num_frequencies), dtype=np.float32)
    out[..., 0] = i
    out[..., 1] = q
    out[np.arange(r), :, 2 + np.asarray(selectors, dtype=np.int64).reshape(-1)] = 1.0
    return out


def block_features(products: np.ndarray, selectors, num_frequencies: int, block: int) -> np.ndarray:
    """(R, N, 2) scaled sample x reference products (N a multiple of `block`) → the LSTM's inputs
    (R, N / block, 2 + F): twice the block means (2I, 2Q plus the beats), then the one-hot
    selector."""
    i, q = (block_means(np.ascontiguousarray(products[..., k]), block) for k in (0, 1))
    return _inputs(i, q, selectors, num_frequencies)


def _rows(array: np.ndarray, index: np.ndarray) -> np.ndarray:
    """array[index] along the first axis: the same copy, a block at a time (numpy's fancy
    indexing copies element by element, many times slower for long rows)."""
    return np.take(array, index, axis=0)


@functools.lru_cache(maxsize=32)
def _oscillators(
    hz: tuple[float, ...], window: int, sample_rate: int
) -> tuple[np.ndarray, np.ndarray]:
    """`reference` of the frequencies `hz` over samples 0 .. window - 1, read-only."""
    sin, cos = reference(np.asarray(hz, dtype=np.float64), np.arange(window), sample_rate)
    sin.setflags(write=False)
    cos.setflags(write=False)
    return sin, cos


def window_inputs(
    windows: np.ndarray,
    lengths: np.ndarray,
    selectors,
    frequencies,
    sample_rate: int,
    block: int,
    source: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Windows (R, W) of raw samples, each `lengths[r]` long (zeros after) → LSTM inputs
    (R, W / block, 2 + F), the running scale (R, W), and the reference sin, cos (R, W), each
    window read from its own first sample (index 0: a window is a request of its own).
    `source` (R,): row r reads window `source[r]` of `windows` (U, W) (its length
    `lengths[source[r]]`), so a window read for several selectors is scaled once; None: row r
    reads window r."""
    w = windows.shape[1]
    scale = running_scale(windows)
    x = windows / scale
    x[np.arange(w)[None, :] >= lengths[:, None]] = 0.0
    if source is not None:  # each row its window's numbers, as if scaled alone (row by row)
        src = np.asarray(source, dtype=np.int64)
        scale, x = _rows(scale, src), _rows(x, src)
    hz = np.asarray(frequencies, dtype=np.float64)[np.asarray(selectors, dtype=np.int64)]
    # Every row starts at index 0: one oscillator row per distinct frequency, the same numbers.
    distinct, row_of = np.unique(hz, return_inverse=True)
    sin_d, cos_d = _oscillators(tuple(distinct.tolist()), w, sample_rate)
    sin, cos = _rows(sin_d, row_of.reshape(-1)), _rows(cos_d, row_of.reshape(-1))
    features = _inputs(block_means(x * sin, block), block_means(x * cos, block), selectors,
                       len(frequencies))  # fmt: skip
    return features, scale, sin, cos


def compose(iq: np.ndarray, sin: np.ndarray, cos: np.ndarray, block: int) -> np.ndarray:
    """(R, NB, 2) per-block (I, Q) → (R, NB * block) I*sin + Q*cos at each sample's phase, each
    block's (I, Q) broadcast over its samples."""
    r, nb = iq.shape[:2]
    s3, c3 = sin.reshape(r, nb, block), cos.reshape(r, nb, block)
    return (iq[:, :, 0:1] * s3 + iq[:, :, 1:2] * c3).reshape(r, nb * block)


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
    """(R, NB, 3) band terms → (R, NB * block) std at each sample's phase, each block's terms
    broadcast over its samples."""
    r, nb = terms.shape[:2]
    s, c = sin.reshape(r, nb, block), cos.reshape(r, nb, block)
    a, b2, cc = terms[:, :, 0:1], 2 * terms[:, :, 1:2], terms[:, :, 2:3]
    var = a * s * s
    var += b2 * s * c
    var += cc * c * c
    np.maximum(var, 0.0, out=var)
    return np.sqrt(var, out=var).reshape(r, nb * block)


def reverse_rows(windows: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each row's first `lengths[r]` samples in reverse order, zeros after."""
    out = np.zeros_like(windows)
    lengths = np.asarray(lengths, dtype=np.int64)
    for m in np.unique(lengths).tolist():  # one copy per distinct length (a batch has few)
        if m <= 0:
            continue
        rows = lengths == m
        if rows.all():
            out[:, :m] = windows[:, m - 1 :: -1]
        else:
            out[rows, :m] = windows[rows, m - 1 :: -1]
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
    source: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The sequence mode over windows (R, W) of raw samples, `lengths[r]` real each: every window
    read forward and backward (a reversed sum of sinusoids is one too) in one `run` call, the two
    answers blended by how much of the window each had read. `run` maps LSTM inputs (R', NB,
    2 + F) to ((I, Q) (R', NB, 2), hidden states (R', NB, H)). Returns answers and std bands
    (R, W) in the signal's units; `banded` (R,) bool: the rows whose band is computed (None: all),
    the others' band left zero (the answers do not depend on it). `source` (R,): row r reads
    window `source[r]` of `windows` (U, W), `lengths` (U,) (a window read for several selectors
    is scaled and reversed once); None: row r reads window r."""
    u, w = windows.shape
    src = np.arange(u) if source is None else np.asarray(source, dtype=np.int64)
    r = src.shape[0]
    both = np.concatenate([windows, reverse_rows(windows, lengths)])
    lens = np.concatenate([lengths, lengths])
    sel = np.concatenate([np.asarray(selectors), np.asarray(selectors)])
    x, scale, sin, cos = window_inputs(both, lens, sel, frequencies, sample_rate, block,
                                       np.concatenate([src, src + u]))  # fmt: skip
    lengths = np.asarray(lengths, dtype=np.int64)[src]
    iq, hidden = run(x)
    out = compose(iq, sin, cos, block) * scale
    rows = np.ones(r, dtype=bool) if banded is None else np.asarray(banded, dtype=bool)
    both_rows = np.concatenate([rows, rows])
    std = np.zeros_like(out)
    if both_rows.all():
        std = band(band_terms(hidden, head_weight, dropout), sin, cos, block) * scale
    elif both_rows.any():
        at = np.flatnonzero(both_rows)
        std[at] = (
            band(band_terms(_rows(hidden, at), head_weight, dropout),
                 _rows(sin, at), _rows(cos, at), block) * _rows(scale, at)
        )  # fmt: skip
    fwd, back = out[:r], reverse_rows(out[r:], lengths)
    fwd_std, back_std = std[:r], reverse_rows(std[r:], lengths)
    # How much each pass is trusted at each position: the square of the blocks it has read.
    pos = np.arange(w)
    read_fwd = (pos // block + 1).astype(np.float64)
    read_back = (np.maximum(lengths[:, None] - 1 - pos, 0) // block + 1).astype(np.float64)
    wf, wb = np.broadcast_to(read_fwd * read_fwd, read_back.shape), read_back * read_back
    total = wf + wb
    answer = (fwd * wf + back * wb) / total
    spread = np.zeros((r, w))
    if rows.all():
        spread = (fwd_std * wf + back_std * wb) / total
    elif rows.any():
        at = np.flatnonzero(rows)
        spread[at] = (
            _rows(fwd_std, at) * _rows(wf, at) + _rows(back_std, at) * _rows(wb, at)
        ) / _rows(total, at)
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
    feats = _inputs(sums[..., 0] * (2.0 / block), sums[..., 1] * (2.0 / block), selectors,
                    len(frequencies))  # fmt: skip
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
