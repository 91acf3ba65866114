"""Block attributions, for any signal model: which part of the signal drove each extracted
component, per requested frequency an attribution per input sample, from Captum.

Method: `Occlusion` over the served runtime (windows through the exported graph, stitched as for a
prediction): a sliding block of samples is set to 0, and the drop of the component's energy (mean
square of the extracted sinusoid) is shared among the block's samples; overlapping blocks average.
Positive: those samples feed the component; negative: removing them makes it stronger (noise the
model was cancelling). It needs forward passes only, so the ONNX graph that serves is the one
explained. docs/explanations.md measures it against random perturbation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from handlers.codec import Reply
from handlers.explain import JsonExplanation
from handlers.kits.signal import codec
from handlers.kits.signal.codec import SignalRequest


@dataclass(frozen=True)
class SignalExplanation(JsonExplanation):
    frequencies: tuple[float, ...]
    attributions: np.ndarray
    """(F, N) float32: per requested frequency, each input sample's share of its component's energy
    drop when occluded."""
    energy: tuple[float, ...]
    """Per frequency, the target: the mean square of its extracted component for the whole signal."""
    block: int
    """Samples occluded together (stride: half of it)."""
    evaluations: int
    model: dict = field(default_factory=dict)
    binary: bool = False
    """Answer as float32 (the client sent Accept: application/octet-stream)."""

    def reply(self) -> Reply:
        if not self.binary:
            return super().reply()
        data = np.ascontiguousarray(self.attributions, dtype="<f4")
        headers = {
            "X-Shape": ",".join(str(d) for d in data.shape),
            "X-Layout": "frequency,sample float32le; attribution of each input sample",
            "X-Frequencies": ",".join(f"{f:g}" for f in self.frequencies),
            "X-Explained": "occlusion; target component energy",
        }
        return Reply(data.tobytes(), codec.FLOAT32, headers)

    def to_json(self) -> dict:
        return {
            "target": "component energy (mean square of the extracted signal)",
            "frequencies": list(self.frequencies),
            "energy": [round(e, 8) for e in self.energy],
            "attributions": self.attributions,
            "block": self.block,
            "method": "occlusion",
            "evaluations": self.evaluations,
            "model": self.model,
        }


class BlockExplainer:
    """Occlusion over blocks of samples through the predictor's engine (`SignalEngine`)."""

    def __init__(self, predictor: Any, block: int = 50, batch: int = 16):
        self.predictor = predictor
        self.block = block
        self.batch = batch
        """Occluded signals per runtime call."""

    def cost(self, request: SignalRequest) -> int:
        """Forward passes (whole signals through the model) one explanation takes."""
        n = request.signal.shape[0]
        stride = max(1, self.block // 2)
        blocks = max(1, (max(n - self.block, 0) + stride - 1) // stride + 1)
        return (blocks + 1) * len(request.selectors)

    def explain(self, request: SignalRequest) -> SignalExplanation:
        import torch
        from captum.attr import Occlusion

        engine = self.predictor.engine
        n = request.signal.shape[0]
        block = min(self.block, n)
        stride = max(1, block // 2)
        evaluations = 0
        rows, energies = [], []
        for j, f in enumerate(request.frequencies):
            one = replace(
                request,
                frequencies=(f,),
                selectors=(request.selectors[j],),
                start=False,
                state=None,
            )

            def forward(x: torch.Tensor, one: SignalRequest = one) -> torch.Tensor:
                nonlocal evaluations
                signals = x.detach().numpy().astype(np.float32)
                evaluations += len(signals)
                comps = engine.windows([replace(one, signal=s, band=False) for s in signals])
                return torch.tensor([float(np.mean(c.signal[0] ** 2)) for c in comps])

            x = torch.from_numpy(np.asarray(request.signal, dtype=np.float32)[None])
            energies.append(float(forward(x)[0]))
            attr = Occlusion(forward).attribute(
                x,
                sliding_window_shapes=(block,),
                strides=(stride,),
                baselines=0.0,
                perturbations_per_eval=self.batch,
            )
            # Occlusion gives each sample the energy drop of the blocks covering it (averaged);
            # sharing it among the block's samples makes the map sum to about the drop.
            rows.append(attr[0].numpy() / block)
        return SignalExplanation(
            frequencies=tuple(request.frequencies),
            attributions=np.stack(rows).astype(np.float32),
            energy=tuple(energies),
            block=block,
            evaluations=evaluations,
            model=dict(self.predictor.model_info),
            binary=request.binary_answer,
        )
