"""The model side of the handler: one runtime call for all windows of a batch, one per stream
chunk length, and the dropout std band from the head alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from handlers.frequency.lockin import (
    Carried,
    read_windows,
    stream_answer,
    stream_chunk,
    stream_signal,
)
from handlers.frequency.settings import FrequencySettings
from handlers.frequency.state import StreamState
from handlers.frequency.stationarity import Stats, update
from handlers.heap import keep_freed_memory
from handlers.kits.signal.codec import SignalRequest
from handlers.kits.signal.predict import Components
from handlers.kits.signal.windowing import num_windows, windowed
from handlers.runtime import core_slots, load_runtime
from handlers.uncertainty import MLPHead

HANN = 1.0
"""The stitching taper's skew: symmetric, since every window is read in both directions."""


class FrequencyEngine:
    def __init__(self, settings: FrequencySettings, model_dir: str | Path, device: str = "cpu"):
        self.settings = settings
        s = settings
        keep_freed_memory()  # batch after batch the same MB-sized arrays: no page faults for them
        slots = core_slots(model_dir, s.threads, s.share_cores)
        self.sequence, self.step = (
            load_runtime(s.runtime, model_dir, g.inputs, g.outputs, device, s.threads, g.filename,
                         spinning=s.intra_op_spinning, slots=slots)
            for g in (s.sequence, s.step)
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
        backward (handlers/frequency/lockin.read_windows), in one runtime call, stitched back
        (handlers/kits/signal/windowing.windowed). The band is computed only for the requests
        that ask for it (`SignalRequest.band`); the answers are the same either way."""
        s = self.settings
        window, hop = s.window, s.hop
        # Row by row as windowed lays them out: per request, per selector, its windows.
        rows = [len(r.selectors) * num_windows(r.signal.shape[0], window, hop) for r in requests]
        banded = np.repeat(np.array([r.band for r in requests], dtype=bool), rows)
        # The band's factors from sample 0 (the longest banded request's; a shorter one's are
        # their first samples).
        longest = max((r.signal.shape[0] for r in requests if r.band), default=0)
        factors = s.band_factors("windows", 0, longest)

        def read(
            wins: np.ndarray, lengths: np.ndarray, source: np.ndarray, selectors: np.ndarray
        ) -> tuple:
            return read_windows(wins, lengths, selectors, s.frequencies, s.sample_rate, s.block,
                                self._run_sequence, self.head_weight, self.head.dropout,
                                banded, source)  # fmt: skip

        pairs = [(r.signal, r.selectors) for r in requests]
        return [
            # the band calibrated at training (handlers/frequency/settings.BandScale)
            Components(
                out,
                (std * factors[: std.shape[-1]]).astype(std.dtype) if req.band else None,
            )
            for req, (out, std) in zip(
                requests, windowed(pairs, window, hop, read, HANN), strict=True
            )
        ]

    def zero_state(self, req: SignalRequest) -> StreamState:
        shape = (self.settings.layers, len(req.selectors), self.settings.hidden)
        zero = np.zeros(shape, dtype=np.float32)
        return StreamState(
            h=zero,
            c=zero.copy(),
            frequencies=req.frequencies,
            selectors=req.selectors,
            stats=Stats.zero(len(self.settings.frequencies)),
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
        for i, (req, state) in enumerate(chunks):
            iq, hidden, hn, cn = stepped[i]
            prep = prepared[i][1]
            if req.band:
                answer, raw = stream_answer(iq, hidden, state.h[-1], prep, self.head_weight,
                                            self.head.dropout)  # fmt: skip
                # the band calibrated at training (handlers/frequency/settings.BandScale)
                factors = s.band_factors("stream", state.samples_seen, raw.shape[1])
                std: np.ndarray | None = (raw * factors).astype(np.float32)
            else:
                answer, std = stream_signal(iq, state.h[-1], prep, self.head_weight), None
            after: Carried = prep[-1]
            stats = state.stats if state.stats is not None else Stats.zero(len(s.frequencies))
            stats = update(stats, req.signal, state.samples_seen, s.sample_rate, s.frequencies)
            new = StreamState(
                h=np.ascontiguousarray(hn, dtype=np.float32),
                c=np.ascontiguousarray(cn, dtype=np.float32),
                frequencies=state.frequencies,
                selectors=state.selectors,
                samples_seen=after.seen,
                energy=after.energy,
                acc=after.acc,
                stats=stats,
            )
            results.append((Components(answer.astype(np.float32), std), new))
        return results
