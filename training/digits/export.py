"""Export to TorchScript (model.pt) and ONNX (model.onnx), both answering (logits, features), and
the head over the features as head.npz (handlers/uncertainty.py's MLPHead), gated on parity with
eager.

Traced at batch 2; parity is checked at batch sizes the exporter never saw, on noise and on real
digits, for both outputs of both runtimes and for the numpy head's logits over eager's features; a
mismatch raises before any manifest exists.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from handlers.kits.image.reading import model_batch
from handlers.kits.image.settings import ImageExport
from handlers.runtime import RUNTIME_FILES, load_runtime
from training.common.parity import ParityCase, check_parity
from training.digits.model import mlp_head

ATOL = 1e-4
FILES = ("model.pt", "model.onnx", "head.npz")


def export_all(model: torch.nn.Module, export: ImageExport, out: Path, greys: np.ndarray) -> dict:
    """Write both exports and head.npz into `out` and return the parity report (or raise
    ParityError)."""
    model = model.eval()
    name, output, features = export.input_name, export.output_name, export.features_name
    example = torch.zeros(2, *export.input_shape)
    torch.jit.script(model).save(str(out / RUNTIME_FILES["torchscript"]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter warns that it is legacy
        torch.onnx.export(
            model,
            (example,),
            str(out / RUNTIME_FILES["onnx"]),
            input_names=[name],
            output_names=[output, features],
            dynamic_axes={name: {0: "batch"}, output: {0: "batch"}, features: {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    head = mlp_head(model)
    head.save(out / export.head)

    def eager(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with torch.inference_mode():
            logits, feats = model(torch.from_numpy(inputs[name]))
        return {output: logits.numpy(), features: feats.numpy()}

    def numpy_head(inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feats = eager(inputs)[features]
        return {output: head.forward(feats), features: feats}

    rng = np.random.default_rng(123)
    cases = [
        ParityCase(f"noise batch={b}", {name: rng.normal(0, 1.5, (b, *export.input_shape)).astype(np.float32)})
        for b in (1, 7)
    ] + [ParityCase(f"digits batch={len(greys)}", {name: model_batch(greys, export)})]  # fmt: skip
    runtimes = {
        kind: load_runtime(kind, out, (name,), (output, features), threads=1).run
        for kind in ("torchscript", "onnx")
    }
    runtimes["mlp_head"] = numpy_head
    return check_parity(eager, runtimes, cases, ATOL)
