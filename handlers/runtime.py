"""One interface over TorchScript and ONNX Runtime, chosen by the archive's config.

Both take and return numpy arrays keyed by the names the export wrote into the manifest, so the
handlers never branch on the runtime. `onnx-int8` is the ONNX Runtime session over the export's
dynamically quantized `model.int8.onnx` (same names, same outputs).

On an accelerator nothing falls back to the CPU silently: a CUDA device whose ONNX Runtime cannot
run CUDA fails the worker at load with the reason (TorchServe then reports the model as not
ready), and `providers` says what a session really runs on.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from handlers.errors import ArchiveError

log = logging.getLogger(__name__)

RUNTIME_FILES = {"onnx": "model.onnx", "onnx-int8": "model.int8.onnx", "torchscript": "model.pt"}
ONNX_KINDS = ("onnx", "onnx-int8")
CUDA_PROVIDER = "CUDAExecutionProvider"


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
    fp16: bool = False
    """Run under autocast float16 (GPU option). The traced graph bakes its mask dtype as float32,
    so `.half()` on the module breaks it; autocast keeps the mask math in float32."""

    def __post_init__(self) -> None:
        import torch

        if self.threads:
            torch.set_num_threads(self.threads)
        self._torch = torch
        if self.device != "cpu":
            pinned = pinned_devices(torch.jit.load(str(self.path), map_location="cpu"))
            if "cpu" in pinned:
                raise ArchiveError(
                    f"{self.path.name} was traced on the CPU and hard-codes CPU tensors (the "
                    f"encoder's mask code), so it cannot run on {self.device}: serve runtime: onnx "
                    "with onnxruntime-gpu (requirements-gpu.txt), or trace on a GPU machine"
                )
        self._module = torch.jit.load(str(self.path), map_location=self.device).eval()

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        torch = self._torch
        args = [
            torch.from_numpy(np.ascontiguousarray(inputs[n])).to(self.device)
            for n in self.input_names
        ]
        device_type = self.device.split(":")[0]
        with (
            torch.inference_mode(),
            torch.autocast(device_type, dtype=torch.float16, enabled=self.fp16),
        ):
            out = self._module(*args)
        if isinstance(out, torch.Tensor):
            out = (out,)
        return {
            n: t.detach().float().cpu().numpy() for n, t in zip(self.output_names, out, strict=True)
        }


_DEVICE_LITERAL = re.compile(r'torch\.device\("([a-z]+)')


def pinned_devices(module) -> set[str]:
    """Device types a traced graph names literally (`torch.device("cpu")` in its code): a trace
    records the device of every tensor it saw created, and `map_location` does not rewrite those."""
    found: set[str] = set()
    for sub in module.modules():
        found |= set(_DEVICE_LITERAL.findall(getattr(sub, "code", "") or ""))
    return found


def onnx_providers(device: str, available: list[str]) -> list:
    """The providers to ask ONNX Runtime for on `device`, or ArchiveError where a CUDA device cannot
    be served by this onnxruntime (the CPU build, or onnxruntime-gpu without its CUDA libraries)."""
    if not device.startswith("cuda"):
        return ["CPUExecutionProvider"]
    if CUDA_PROVIDER not in available:
        raise ArchiveError(
            f"device {device} but onnxruntime offers only {available}: install onnxruntime-gpu "
            "(requirements-gpu.txt, which the GPU image installs)"
        )
    gpu = int(device.split(":")[1]) if ":" in device else 0
    return [(CUDA_PROVIDER, {"device_id": gpu}), "CPUExecutionProvider"]


@dataclass
class OnnxRuntime(_ExportedModel):
    spinning: bool = False
    """ONNX Runtime's intra-op threads busy-wait between ops by default; on a few cores shared with
    TorchServe's Java frontend that spinning steals the cycles the frontend needs."""

    def __post_init__(self) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if self.threads:
            opts.intra_op_num_threads = self.threads
            opts.inter_op_num_threads = 1
        opts.add_session_config_entry(
            "session.intra_op.allow_spinning", "1" if self.spinning else "0"
        )
        providers = onnx_providers(self.device, list(ort.get_available_providers()))
        self.options = opts
        self._session = ort.InferenceSession(str(self.path), sess_options=opts, providers=providers)
        self.providers = tuple(self._session.get_providers())
        # onnxruntime-gpu builds a session even when libcudart/cudnn fail to load: it logs a warning
        # and runs on the CPU. That is the silent fallback this check turns into a load failure.
        if self.device.startswith("cuda") and CUDA_PROVIDER not in self.providers:
            raise ArchiveError(
                f"device {self.device} but the ONNX Runtime session runs on {list(self.providers)}"
                " (CUDA libraries missing or mismatched?); refusing to serve a GPU model on the CPU"
            )
        if not self.device.startswith("cuda"):
            self.device = "cpu"  # e.g. mps: ONNX Runtime has no MPS provider; say where it runs
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
    fp16: bool = False,
    spinning: bool = False,
) -> Runtime:
    """Open the exported model of `kind` (see RUNTIME_FILES) found in `model_dir`."""
    if kind not in RUNTIME_FILES:
        raise ArchiveError(f"runtime must be one of {sorted(RUNTIME_FILES)}, not {kind!r}")
    path = Path(model_dir) / (filename or RUNTIME_FILES[kind])
    if not path.is_file():
        raise ArchiveError(f"the archive has no {path.name} for runtime {kind!r}")
    names = (path, tuple(input_names), tuple(output_names))
    if kind in ONNX_KINDS:
        if fp16:
            raise ArchiveError("fp16 is a TorchScript option (runtime: torchscript on a GPU)")
        return OnnxRuntime(*names, device=device, threads=threads, spinning=spinning)
    return TorchScriptRuntime(*names, device=device, threads=threads, fp16=fp16)


def device_from_properties(properties: dict) -> str:
    """TorchServe tells each worker its GPU in system_properties; never hard-code cuda:0. On an
    Apple laptop TorchServe hands out gpu_id too, and the accelerator is MPS."""
    import torch

    gpu_id = properties.get("gpu_id")
    if gpu_id is None:
        return "cpu"
    if torch.cuda.is_available():
        return f"cuda:{int(gpu_id)}"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"
