"""The model side of the handler: one runtime call for all windows of a batch, one per stream
chunk length, and the dropout std band from the head alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from handlers.frequency.codec import SignalRequest
from handlers.frequency.lockin import Carried, read_windows, stream_answer, stream_chunk
from handlers.frequency.settings import FrequencySettings
from handlers.frequency.state import StreamState
from handlers.frequency.windowing import split, stitch
from handlers.runtime import Runtime, core_slots, load_runtime
from handlers.uncertainty import MLPHead

HANN = 1.0
"""The stitching taper's skew: symmetric, since every window is read in both directions."""


@dataclass(frozen=True)
class Components:
    signal: np.ndarray
    """(F, N) extracted sinusoid per requested frequency."""
    std: np.ndarray
    """(F, N) dropout standard deviation of each sample."""


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
        self.head_weight = self.head.weights[0]
        """(2, H): the (I, Q) head; its dropout band is computed exactly (lockin.band_terms)."""

    def _run_sequence(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = self.settings
        out = self.sequence.run({s.sequence.inputs[0]: x})
        return out[s.sequence.outputs[0]], out[s.sequence.outputs[1]]

    def windows(self, requests: list[SignalRequest]) -> list[Components]:
        """Every window of every request and requested frequency, each read forward and
        backward (handlers/frequency/lockin.read_windows), in one runtime call."""
        s = self.settings
        rows: list[np.ndarray] = []
        lengths: list[np.ndarray] = []
        selectors: list[int] = []
        spans: list[tuple[int, int]] = []
        for req in requests:
            n = req.signal.shape[0]
            win = split(req.signal.astype(np.float64), s.window, s.hop)
            lens = np.minimum(s.window, n - np.arange(win.shape[0]) * s.hop)
            start = sum(r.shape[0] for r in rows)
            for sel in req.selectors:
                rows.append(win)
                lengths.append(lens)
                selectors.extend([sel] * win.shape[0])
            spans.append((start, win.shape[0]))
        if not rows:
            return []
        output, std = read_windows(
            np.concatenate(rows), np.concatenate(lengths), np.asarray(selectors),
            s.frequencies, s.sample_rate, s.block, self._run_sequence, self.head_weight,
            self.head.dropout,
        )  # fmt: skip
        results = []
        for req, (start, n) in zip(requests, spans, strict=True):
            # One overlap-add for the request's components and their bands: (n windows, window,
            # frequencies, signal|std), the same sums per sample as stitching each series alone.
            f = len(req.selectors)
            rows_of = slice(start, start + f * n)
            pieces = np.stack([output[rows_of], std[rows_of]], axis=-1)
            pieces = pieces.reshape(f, n, s.window, 2).transpose(1, 2, 0, 3)
            both = stitch(pieces, req.signal.shape[0], s.hop, HANN)  # (samples, f, 2)
            both[..., 1] *= s.band_factors("windows", 0, both.shape[0])[:, None]  # calibrated
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
            h=zero,
            c=zero.copy(),
            frequencies=req.frequencies,
            selectors=req.selectors,
            acc=np.zeros((len(req.selectors), 2), dtype=np.float32),
        )

    def stream(
        self, chunks: list[tuple[SignalRequest, StreamState]]
    ) -> list[tuple[Components, StreamState]]:
        """Continue each stream by its chunk (handlers/frequency/lockin.stream_chunk): the blocks
        a chunk completes go through the step graph, chunks completing as many blocks share a
        runtime call, and a chunk that completes none needs no call at all."""
        s = self.settings
        prepared = []
        by_blocks: dict[int, list[int]] = {}
        for i, (req, state) in enumerate(chunks):
            acc = state.acc if state.acc is not None else np.zeros((len(state.selectors), 2))
            carried = Carried(state.samples_seen, state.energy, acc)
            feats, prep = stream_chunk(req.signal.astype(np.float64), carried, state.selectors,
                                       s.frequencies, s.sample_rate, s.block)  # fmt: skip
            prepared.append((feats, prep))
            by_blocks.setdefault(feats.shape[1], []).append(i)
        stepped: dict[int, tuple] = {}
        for k, idxs in by_blocks.items():
            if k == 0:
                for i in idxs:
                    st = chunks[i][1]
                    f = len(st.selectors)
                    stepped[i] = (np.zeros((f, 0, 2), np.float32),
                                  np.zeros((f, 0, s.hidden), np.float32), st.h, st.c)  # fmt: skip
                continue
            names = s.step.inputs
            out = self.step.run({
                names[0]: np.concatenate([prepared[i][0] for i in idxs]),
                names[1]: np.concatenate([chunks[i][1].h for i in idxs], axis=1),
                names[2]: np.concatenate([chunks[i][1].c for i in idxs], axis=1),
            })  # fmt: skip
            iq, hidden, hn, cn = (out[n] for n in s.step.outputs)
            row = 0
            for i in idxs:
                f = len(chunks[i][1].selectors)
                rows = slice(row, row + f)
                stepped[i] = (iq[rows], hidden[rows], hn[:, rows].copy(), cn[:, rows].copy())
                row += f
        results: list = []
        for i, (_, state) in enumerate(chunks):
            iq, hidden, hn, cn = stepped[i]
            prep = prepared[i][1]
            answer, std = stream_answer(iq, hidden, state.h[-1], prep, self.head_weight,
                                        self.head.dropout)  # fmt: skip
            after: Carried = prep[-1]
            new = StreamState(
                h=np.ascontiguousarray(hn, dtype=np.float32),
                c=np.ascontiguousarray(cn, dtype=np.float32),
                frequencies=state.frequencies,
                selectors=state.selectors,
                samples_seen=after.seen,
                energy=after.energy,
                acc=after.acc,
            )
            std = std * s.band_factors("stream", state.samples_seen, std.shape[1])  # calibrated
            results.append((Components(answer.astype(np.float32), std.astype(np.float32)), new))
        return results
