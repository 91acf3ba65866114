"""The model side of the handler: one runtime call for all windows of a batch, one per stream
chunk length, and the dropout std band from the head alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from handlers.frequency.codec import SignalRequest
from handlers.frequency.settings import FrequencySettings
from handlers.frequency.state import StreamState
from handlers.frequency.windowing import split, stitch
from handlers.runtime import Runtime, core_slots, load_runtime
from handlers.uncertainty import MLPHead


@dataclass(frozen=True)
class Components:
    signal: np.ndarray
    """(F, N) extracted sinusoid per requested frequency."""
    std: np.ndarray
    """(F, N) MC-dropout standard deviation of each sample."""


def model_inputs(samples: np.ndarray, selectors, num_frequencies: int) -> np.ndarray:
    """(..., T) samples → (..., T, 1 + F): each sample followed by the one-hot frequency selector.

    `selectors` is one index for every row, or one per row of (R, T) samples. Training builds its
    inputs with this function too, so the two cannot drift apart."""
    x = np.zeros((*samples.shape, 1 + num_frequencies), dtype=np.float32)
    x[..., 0] = samples
    sel = np.asarray(selectors)
    if sel.ndim == 0:
        x[..., 1 + int(sel)] = 1.0
    else:
        x[np.arange(samples.shape[0]), :, 1 + sel] = 1.0
    return x


class StdBand:
    """The std of the head's output under dropout, per sample.

    For a one-layer linear head, y = b + sum_j w_j x_j m_j with independent inverted-dropout
    masks m_j (0 with probability p, 1/(1-p) otherwise: mean 1, variance p/(1-p)), so the
    variance is exact and needs no samples: var(y) = p/(1-p) * sum_j (w_j x_j)^2. That is the
    quantity the MC-dropout samples estimate (32 fixed masks had a sampling error of about 1/8
    of the band), at a 64th of the cost: one (rows, H) square and a weighted row sum per request
    (the sampled band was 5 ms of a 34 ms 2,000-sample request). Other heads sample their masks.
    """

    def __init__(self, head: MLPHead, masks: tuple[np.ndarray, ...]):
        self.head, self.masks = head, masks
        self.linear = (
            len(head.weights) == 1
            and head.weights[0].shape[0] == 1
            and head.activations[0] in ("", "none")
        )
        if self.linear:
            p = float(head.dropout)
            factor = p / (1.0 - p) if p < 1.0 else np.inf
            self.weight = (np.square(head.weights[0][0], dtype=np.float64) * factor).astype(
                np.float32
            )  # (H,)

    def __call__(self, features: np.ndarray) -> np.ndarray:
        """(..., H) → (...) float32."""
        if not self.linear:
            from handlers.uncertainty import regress_with_uncertainty

            return regress_with_uncertainty(features, self.head, self.masks)[1][..., 0]
        rows = features.reshape(-1, features.shape[-1]).astype(np.float32, copy=False)
        # A row-by-row weighted sum (no BLAS): each row's result is bitwise the same whatever
        # else is in the batch.
        var = np.einsum("ij,ij,j->i", rows, rows, self.weight)
        return np.sqrt(var, out=var).reshape(features.shape[:-1])


def head_std(features: np.ndarray, head: MLPHead, masks: tuple[np.ndarray, ...]) -> np.ndarray:
    """(..., H) → (...) dropout std (training's metrics use the serving computation)."""
    return StdBand(head, masks)(features)


class FrequencyEngine:
    def __init__(self, settings: FrequencySettings, model_dir: str | Path, device: str = "cpu"):
        self.settings = settings
        s = settings
        slots = core_slots(model_dir, s.threads, s.share_cores)
        self.sequence: Runtime = load_runtime(
            s.runtime,
            model_dir,
            s.sequence.inputs,
            s.sequence.outputs,
            device,
            s.threads,
            s.sequence.filename,
            spinning=s.intra_op_spinning,
            slots=slots,
        )
        self.step: Runtime = load_runtime(
            s.runtime, model_dir, s.step.inputs, s.step.outputs, device, s.threads,
            s.step.filename, spinning=s.intra_op_spinning, slots=slots,
        )  # fmt: skip
        self.head = MLPHead.load(Path(model_dir) / s.head_file)
        self.masks = self.head.masks(s.mc_samples, s.seed)
        self.std_band = StdBand(self.head, self.masks)

    def windows(self, requests: list[SignalRequest]) -> list[Components]:
        """Every window of every request and requested frequency in one runtime call."""
        s = self.settings
        rows: list[np.ndarray] = []
        selectors: list[int] = []
        spans: list[tuple[int, int]] = []
        for req in requests:
            win = split(req.signal, s.window, s.hop)
            start = sum(r.shape[0] for r in rows)
            for sel in req.selectors:
                rows.append(win)
                selectors.extend([sel] * win.shape[0])
            spans.append((start, win.shape[0]))
        if not rows:
            return []
        x = model_inputs(np.concatenate(rows), selectors, len(s.frequencies))
        out = self.sequence.run({s.sequence.inputs[0]: x})
        output, features = out[s.sequence.outputs[0]], out[s.sequence.outputs[1]]
        std = self.std_band(features)
        results = []
        for req, (start, n) in zip(requests, spans, strict=True):
            # One overlap-add for the request's components and their bands: (n windows, window,
            # frequencies, signal|std), the same sums per sample as stitching each series alone.
            f = len(req.selectors)
            rows_of = slice(start, start + f * n)
            pieces = np.stack([output[rows_of], std[rows_of]], axis=-1)
            pieces = pieces.reshape(f, n, s.window, 2).transpose(1, 2, 0, 3)
            both = stitch(pieces, req.signal.shape[0], s.hop)  # (samples, f, 2)
            results.append(
                Components(
                    np.ascontiguousarray(both[..., 0].T), np.ascontiguousarray(both[..., 1].T)
                )
            )
        return results

    def zero_state(self, req: SignalRequest) -> StreamState:
        shape = (self.settings.layers, len(req.selectors), self.settings.hidden)
        zero = np.zeros(shape, dtype=np.float32)
        return StreamState(
            h=zero, c=zero.copy(), frequencies=req.frequencies, selectors=req.selectors
        )

    def stream(
        self, chunks: list[tuple[SignalRequest, StreamState]]
    ) -> list[tuple[Components, StreamState]]:
        """Continue each stream by its chunk; chunks of one length share a runtime call."""
        s = self.settings
        results: list = [None] * len(chunks)
        by_length: dict[int, list[int]] = {}
        for i, (req, _) in enumerate(chunks):
            by_length.setdefault(req.signal.shape[0], []).append(i)
        for idxs in by_length.values():
            samples = np.concatenate(
                [np.repeat(chunks[i][0].signal[None], len(chunks[i][1].selectors), 0) for i in idxs]
            )
            sel = [x for i in idxs for x in chunks[i][1].selectors]
            h = np.concatenate([chunks[i][1].h for i in idxs], axis=1)
            c = np.concatenate([chunks[i][1].c for i in idxs], axis=1)
            names = s.step.inputs
            out = self.step.run(
                {names[0]: model_inputs(samples, sel, len(s.frequencies)), names[1]: h, names[2]: c}
            )
            output, features, hn, cn = (out[n] for n in s.step.outputs)
            std = self.std_band(features)
            row = 0
            for i in idxs:
                req, state = chunks[i]
                f = len(state.selectors)
                new = StreamState(
                    h=hn[:, row : row + f].copy(),
                    c=cn[:, row : row + f].copy(),
                    frequencies=state.frequencies,
                    selectors=state.selectors,
                    samples_seen=state.samples_seen + req.signal.shape[0],
                )
                results[i] = (Components(output[row : row + f], std[row : row + f]), new)
                row += f
        return results
