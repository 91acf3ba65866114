"""TorchServe entry point for the frequency-extraction LSTM: wires the lifecycle to plain modules.

One-shot requests are windowed and all their windows (every request, every frequency) run in one
call; stream chunks continue their sequence's (h, c), which the worker keeps between requests.
A bad request becomes its own 4xx answer and never fails its batch neighbours.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ts.torch_handler.base_handler import BaseHandler

from handlers.errors import BadField, RequestError, header_value, mark_refused
from handlers.frequency.codec import SignalRequest, decode_request, json_floats
from handlers.frequency.engine import Components, FrequencyEngine
from handlers.frequency.protocol import SEQUENCE_ID, StreamControl, UnknownSequence, stream_control
from handlers.frequency.settings import FrequencySettings
from handlers.frequency.streaming import StateStore
from handlers.frequency.windowing import num_windows
from handlers.runtime import device_from_properties
from handlers.telemetry import Telemetry, timed

log = logging.getLogger(__name__)

BATCH_SIZE_HEADER = "x-batch-size"
"""Response header: how many requests TorchServe ran together with this one (batching is visible)."""


class FrequencyHandler(BaseHandler):
    def initialize(self, context):
        properties = context.system_properties
        model_dir = Path(properties["model_dir"])
        manifest = json.loads((model_dir / "manifest.json").read_text())
        serving = (getattr(context, "model_yaml_config", None) or {}).get("handler") or {}
        self.settings = FrequencySettings.from_sources(serving, manifest["handler"])
        self.engine = FrequencyEngine(self.settings, model_dir, device_from_properties(properties))
        # Stream state must outlive a request: it is the one thing kept on the handler.
        self.streams = StateStore(self.settings.stream_idle_s, self.settings.max_streams)
        self.model = {"name": context.model_name or "frequency", "version": manifest["version"]}
        self.telemetry = Telemetry.from_context(context)
        self.initialized = True
        log.info("frequency %s ready: runtime=%s", manifest["version"], self.settings.runtime)

    @timed("preprocess")
    def preprocess(
        self, data: list[dict]
    ) -> list[tuple[SignalRequest, StreamControl | None] | RequestError]:
        items = []
        for i, row in enumerate(data):
            headers = self.context.get_all_request_header(i)
            try:
                items.append((decode_request(row, headers, self.settings), stream_control(headers)))
            except RequestError as err:
                items.append(err)
        return items

    @timed("inference")
    def inference(
        self, items: list
    ) -> list[tuple[tuple[float, ...], Components, dict | None] | RequestError]:
        results: list = list(items)
        one_shot = [i for i, it in enumerate(items) if isinstance(it, tuple) and it[1] is None]
        s = self.settings
        self.telemetry.windows(
            num_windows(len(items[i][0].signal), s.window, s.hop) for i in one_shot
        )
        for i, comp in zip(
            one_shot, self.engine.windows([items[i][0] for i in one_shot]), strict=True
        ):
            results[i] = (items[i][0].frequencies, comp, None)
        pending = [i for i, it in enumerate(items) if isinstance(it, tuple) and it[1] is not None]
        # Two chunks of one stream in a batch run in arrival order: one round per repeat.
        while pending:
            seen, round_, later = set(), [], []
            for i in pending:
                sid = items[i][1].sequence_id
                (later if sid in seen else round_).append(i)
                seen.add(sid)
            self._stream_round(items, results, round_)
            pending = later
        return results

    def _stream_round(self, items: list, results: list, idxs: list[int]) -> None:
        chunks, ready = [], []
        for i in idxs:
            req, ctl = items[i]
            try:
                state = self._state_for(req, ctl)
            except RequestError as err:
                results[i] = err
                continue
            chunks.append((req, state))
            ready.append(i)
        for i, (comp, state) in zip(ready, self.engine.stream(chunks), strict=True):
            ctl = items[i][1]
            if ctl.end:
                self.streams.close(ctl.sequence_id)
            else:
                self.streams.put(ctl.sequence_id, state)
            results[i] = (
                items[i][0].frequencies,
                comp,
                {"id": ctl.sequence_id, "samples_seen": state.samples_seen, "closed": ctl.end},
            )

    def _state_for(self, req: SignalRequest, ctl: StreamControl):
        if ctl.start:
            return self.engine.zero_state(req)
        state = self.streams.get(ctl.sequence_id)
        if state is None:
            raise UnknownSequence(
                f"sequence {ctl.sequence_id!r} is not open (never started, closed or expired)"
            )
        if req.frequencies != state.frequencies:
            raise BadField(
                f"this sequence extracts {list(state.frequencies)}; a chunk cannot change them"
            )
        return state

    @timed("postprocess")
    def postprocess(self, results: list) -> list[str]:
        self.telemetry.answers(results, self.context)  # batch size and refusals
        answers = []
        for i, res in enumerate(results):
            self.context.set_response_header(i, BATCH_SIZE_HEADER, str(len(results)))
            if isinstance(res, RequestError):
                answers.append(mark_refused(self.context, i, res))
                continue
            frequencies, comp, sequence = res
            self.telemetry.extractions(frequencies, comp.std)
            body = {
                "sample_rate": self.settings.sample_rate,
                "components": [
                    {
                        "frequency": f,
                        "signal": json_floats(comp.signal[j]),
                        "std": json_floats(comp.std[j]),
                    }
                    for j, f in enumerate(frequencies)
                ],
                "model": self.model,
            }
            if sequence is not None:
                body["sequence"] = sequence
                self.context.set_response_header(i, SEQUENCE_ID, header_value(sequence["id"]))
            answers.append(json.dumps(body))
        return answers
