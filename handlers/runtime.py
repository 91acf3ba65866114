"""One interface over TorchScript and ONNX Runtime, chosen by the archive's config.

Both take and return numpy arrays keyed by the names the export wrote into the manifest, so the
handlers never branch on the runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from handlers.errors import ArchiveError

RUNTIME_FILES = {"onnx": "model.onnx", "torchscript": "model.pt"}


class Runtime(Protocol):
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    device: str

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]: ...


@dataclass
class _ExportedModel:
    """What both runtimes are opened with: the file, its graph's names, where and how wide to run."""

    path: Path
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    device: str = "cpu"
    threads: int | None = None


@dataclass
class TorchScriptRuntime(_ExportedModel):
    def __post_init__(self) -> None:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        self._torch = torch
        self._module = torch.jit.load(str(self.path), map_location=self.device).eval()

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self._torch
        args = [
            torch.from_numpy(np.ascontiguousarray(inputs[n])).to(self.device)
            for n in self.input_names
        ]
        with torch.inference_mode():
            out = self._module(*args)
        if isinstance(out, torch.Tensor):
            out = (out,)
        return {n: t.detach().cpu().numpy() for n, t in zip(self.output_names, out, strict=True)}


@dataclass
class OnnxRuntime(_ExportedModel):
    def __post_init__(self) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads:
            opts.intra_op_num_threads = self.threads
            opts.inter_op_num_threads = 1
        providers: list = ["CPUExecutionProvider"]
        if (
            self.device.startswith("cuda")
            and "CUDAExecutionProvider" in ort.get_available_providers()
        ):
            gpu = int(self.device.split(":")[1]) if ":" in self.device else 0
            providers = [("CUDAExecutionProvider", {"device_id": gpu}), "CPUExecutionProvider"]
        self._session = ort.InferenceSession(str(self.path), sess_options=opts, providers=providers)
        self.providers = tuple(self._session.get_providers())
        got = tuple(i.name for i in self._session.get_inputs())
        if set(got) != set(self.input_names):
            raise ArchiveError(f"ONNX inputs {got} differ from the manifest's {self.input_names}")

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {n: np.ascontiguousarray(inputs[n]) for n in self.input_names}
        outs = self._session.run(list(self.output_names), feeds)
        return dict(zip(self.output_names, outs, strict=True))


def load_runtime(
    kind: str,
    model_dir: str | Path,
    input_names: tuple[str, ...] | list[str],
    output_names: tuple[str, ...] | list[str],
    device: str = "cpu",
    threads: int | None = None,
    filename: str | None = None,
) -> Runtime:
    """Open the exported model of `kind` ("onnx" or "torchscript") found in `model_dir`."""
    if kind not in RUNTIME_FILES:
        raise ArchiveError(f"runtime must be one of {sorted(RUNTIME_FILES)}, not {kind!r}")
    path = Path(model_dir) / (filename or RUNTIME_FILES[kind])
    if not path.is_file():
        raise ArchiveError(f"the archive has no {path.name} for runtime {kind!r}")
    cls = OnnxRuntime if kind == "onnx" else TorchScriptRuntime
    return cls(path, tuple(input_names), tuple(output_names), device=device, threads=threads)


def device_from_properties(properties: dict) -> str:
    """TorchServe tells each worker its GPU in system_properties; never hard-code cuda:0."""
    import torch

    gpu_id = properties.get("gpu_id")
    if gpu_id is not None and torch.cuda.is_available():
        return f"cuda:{int(gpu_id)}"
    return "cpu"
