"""Export to TorchScript (model.pt) and ONNX (model.onnx), gated on parity with eager.

Traced at batch 2; parity is checked at batch sizes the exporter never saw, on noise and on real
digits, and a mismatch raises before any manifest exists.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from handlers.digits.pixels import model_batch
from handlers.digits.settings import DigitsExport
from handlers.runtime import RUNTIME_FILES, load_runtime
from training.common.parity import ParityCase, check_parity

ATOL = 1e-4
FILES = ("model.pt", "model.onnx")


def export_all(model: torch.nn.Module, export: DigitsExport, out: Path, greys: np.ndarray) -> dict:
    """Write both exports into `out` and return the parity report (or raise ParityError)."""
    model = model.eval()
    name, output = export.input_name, export.output_name
    example = torch.zeros(2, *export.input_shape)
    torch.jit.script(model).save(str(out / RUNTIME_FILES["torchscript"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter warns that it is legacy
        torch.onnx.export(
            model,
            (example,),
            str(out / RUNTIME_FILES["onnx"]),
            input_names=[name],
            output_names=[output],
            dynamic_axes={name: {0: "batch"}, output: {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )

    def eager(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            return {output: model(torch.from_numpy(inputs[name])).numpy()}

    rng = np.random.default_rng(123)
    cases = [
        ParityCase(f"noise batch={b}", {name: rng.normal(0, 1.5, (b, *export.input_shape)).astype(np.float32)})
        for b in (1, 7)
    ] + [ParityCase(f"digits batch={len(greys)}", {name: model_batch(greys, export)})]  # fmt: skip
    runtimes = {
        kind: load_runtime(kind, out, (name,), (output,), threads=1).run
        for kind in ("torchscript", "onnx")
    }
    return check_parity(eager, runtimes, cases, ATOL)
