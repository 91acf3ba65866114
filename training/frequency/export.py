"""Export both graphs to TorchScript and ONNX and gate them on parity with eager.

Files: model.pt / model.onnx (sequence mode, what deploy/archive.py picks by runtime) and
step.pt / step.onnx (stateful mode). The traced shapes are tiny and odd on purpose; parity is
checked at batch sizes and lengths the exporter never saw, and a mismatch raises before any
manifest exists.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from handlers.runtime import load_runtime
from training.common.parity import ParityCase, check_parity
from training.frequency.model import (
    INPUTS,
    SEQUENCE_INPUTS,
    SEQUENCE_OUTPUTS,
    STEP_INPUTS,
    STEP_OUTPUTS,
    FrequencyLSTM,
    SequenceGraph,
    StepGraph,
)

ATOL = 1e-4
STEP_FILES = {"onnx": "step.onnx", "torchscript": "step.pt"}
SEQUENCE_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}


def _export(
    graph: torch.nn.Module, args: tuple, out: Path, stem: str, inputs, outputs, dynamic
) -> None:
    torch.jit.script(graph).save(str(out / f"{stem}.pt"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter warns that it is legacy
        torch.onnx.export(
            graph,
            args,
            str(out / f"{stem}.onnx"),
            input_names=list(inputs),
            output_names=list(outputs),
            dynamic_axes=dynamic,
            opset_version=17,
            dynamo=False,  # the dynamo exporter does not keep nn.LSTM's batch/time axes dynamic
        )


def export_all(model: FrequencyLSTM, out: Path) -> dict:
    model = model.eval()
    n_in = model.lstm.input_size
    layers, hidden = model.lstm.num_layers, model.lstm.hidden_size
    seq, step = SequenceGraph(model).eval(), StepGraph(model).eval()
    bt = {0: "batch", 1: "time"}
    state = {1: "batch"}
    x = torch.zeros(2, 7, n_in)
    h = torch.zeros(layers, 2, hidden)
    _export(seq, (x,), out, "model", SEQUENCE_INPUTS, SEQUENCE_OUTPUTS,
            {"signal": bt, "output": bt, "features": bt})  # fmt: skip
    _export(step, (x, h, h), out, "step", STEP_INPUTS, STEP_OUTPUTS,
            {"signal": bt, "h0": state, "c0": state, "output": bt, "features": bt, "hn": state, "cn": state})  # fmt: skip

    rng = np.random.default_rng(123)

    def signal(b, t):
        # Block features: two lock-in products, then the one-hot selector.
        x = np.zeros((b, t, n_in), dtype=np.float32)
        x[..., :INPUTS] = rng.uniform(-1, 1, size=(b, t, INPUTS))
        x[np.arange(b), :, INPUTS + rng.integers(0, n_in - INPUTS, size=b)] = 1.0
        return x

    def eager(graph, names):
        def run(inputs):
            with torch.inference_mode():
                outs = graph(*(torch.from_numpy(inputs[n]) for n in inputs))
            return {k: v.numpy() for k, v in zip(names, outs, strict=True)}

        return run

    def state_array(b):
        return rng.normal(0, 0.5, size=(layers, b, hidden)).astype(np.float32)

    seq_cases = [
        ParityCase(f"batch={b} len={t}", {"signal": signal(b, t)})
        for b, t in ((1, 100), (9, 113), (5, 1))
    ]
    step_cases = [
        ParityCase(
            f"batch={b} len={t}",
            {"signal": signal(b, t), "h0": state_array(b), "c0": state_array(b)},
        )
        for b, t in ((1, 1), (6, 37), (12, 250))
    ]
    report = {}
    for label, graph, inputs, outputs, files, cases in (
        ("sequence", seq, SEQUENCE_INPUTS, SEQUENCE_OUTPUTS, SEQUENCE_FILES, seq_cases),
        ("step", step, STEP_INPUTS, STEP_OUTPUTS, STEP_FILES, step_cases),
    ):
        runtimes = {
            kind: load_runtime(kind, out, inputs, outputs, filename=name, threads=1).run
            for kind, name in files.items()
        }
        report[label] = check_parity(eager(graph, outputs), runtimes, cases, ATOL)
    return report
