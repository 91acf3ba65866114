"""One interface over TorchScript and ONNX Runtime, chosen by the archive's config.

Both take and return numpy arrays keyed by the names the export wrote into the manifest, so the
handlers never branch on the runtime. `onnx-int8` is the ONNX Runtime session over the export's
dynamically quantized `model.int8.onnx` (same names, same outputs).

On an accelerator nothing falls back to the CPU silently: a CUDA device whose ONNX Runtime cannot
run CUDA fails the worker at load with the reason (TorchServe then reports the model as not
ready), a CUDA session never moves itself to the CPU at run time (fallback off), and `providers`
says what a session really runs on. A replica that must run on a GPU (`TS_REQUIRE_GPU=1`, the GPU
overlay) fails to load when torch has no usable CUDA device or TorchServe gave it no gpu_id.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from handlers.errors import ArchiveError

log = logging.getLogger(__name__)

RUNTIME_FILES = {"onnx": "model.onnx", "onnx-int8": "model.int8.onnx", "torchscript": "model.pt"}
ONNX_KINDS = ("onnx", "onnx-int8")
AUTO = "auto"
"""A runtime chosen at load where the worker lands (`resolve_runtime`): the gated int8 export on
a CPU with int8 dot products, fp32 ONNX elsewhere. Its archive carries both."""


def archive_files(kind: str) -> tuple[str, ...]:
    """The top-level model files an archive of runtime `kind` carries: `auto` carries fp32 ONNX
    and (when the gate wrote it) int8; the first is required."""
    return (
        (RUNTIME_FILES["onnx"], RUNTIME_FILES["onnx-int8"])
        if kind == AUTO
        else (RUNTIME_FILES[kind],)
    )


INT8_DOT_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")
"""CPU flags of int8 dot-product instructions. With one, ONNX Runtime's int8 matmuls beat fp32;
without (AVX2 only), its u8s8 kernels are no faster than fp32 FMA (docs/performance.md)."""


def cpu_info(path: Path = Path("/proc/cpuinfo")) -> tuple[str, set[str]]:
    """(model name, flags) of this machine's CPU; empty where /proc/cpuinfo is unreadable."""
    model, flags = "", set[str]()
    try:
        text = path.read_text()
    except OSError:
        return model, flags
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model, flags


def resolve_runtime(
    kind: str, model_dir: str | Path, device: str, flags: set[str] | None = None
) -> tuple[str, str]:
    """(runtime to open, why). `auto` is onnx-int8 on a CPU with int8 dot-product instructions
    (INT8_DOT_FLAGS) when the archive has the gated int8 export; else fp32 onnx: on an accelerator
    (int8 ONNX would run its quantised ops on the CPU there), on a CPU without them (int8 is no
    faster there), or with no int8 file (its gate refused it at export, the reasons in the
    manifest). A named runtime is opened as named. `flags`: the CPU's (default: this machine's)."""
    if kind != AUTO:
        return kind, "named in the model-config"
    if device != "cpu":
        return "onnx", f"fp32 on {device}: the int8 export is a CPU runtime"
    if not (Path(model_dir) / RUNTIME_FILES["onnx-int8"]).is_file():
        return "onnx", (
            "fp32: the archive has no int8 export (refused by its gate at "
            "export, or not built on a CPU without int8 dot products)"
        )
    have = cpu_info()[1] if flags is None else flags
    dot = sorted(have.intersection(INT8_DOT_FLAGS))
    if not dot:
        return "onnx", (
            "fp32: this CPU has no int8 dot-product instructions (avx512_vnni, avx_vnni, "
            "amx_int8), so int8 would be no faster"
        )
    return "onnx-int8", f"the export's gated int8 on a CPU with {', '.join(dot)}"


CUDA_PROVIDER = "CUDAExecutionProvider"
REQUIRE_GPU_ENV = "TS_REQUIRE_GPU"
"""Set to 1 by the GPU overlay (k8s/overlays/gpu): this replica exists to run on a CUDA GPU, so a
worker that would land on the CPU fails to load instead. Unset (CPU images, `make serve`), a
worker without CUDA runs on the CPU, with a warning where TorchServe handed it a gpu_id."""
GPU_UNAVAILABLE = "GPU unavailable"
"""Every load refusal of a GPU replica starts with this; docker/probe.py and deploy/wait_ready.py
quote the worker's ArchiveError line, so the reason reaches the readiness message."""


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
                    f"encoder's mask code of older exports), so it cannot run on "
                    f"{self.device}: export it again (make train: today's export names no device), "
                    "or serve runtime: onnx with onnxruntime-gpu (requirements-gpu.txt)"
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
            f"{GPU_UNAVAILABLE}: device {device} but onnxruntime offers only {available}: install "
            "onnxruntime-gpu "
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
        cuda = self.device.startswith("cuda")
        try:
            # enable_fallback=0: a CUDA provider that fails while the session is built raises here
            # instead of onnxruntime rebuilding the session on the CPU.
            self._session = ort.InferenceSession(
                str(self.path),
                sess_options=opts,
                providers=providers,
                enable_fallback=int(not cuda),
            )
        except (RuntimeError, ValueError) as e:
            if not cuda:
                raise
            raise ArchiveError(
                f"{GPU_UNAVAILABLE}: device {self.device}, but ONNX Runtime could not build a CUDA "
                f"session ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
            ) from e
        if cuda:
            # onnxruntime's sessions fall back by default: an execution-provider failure inside
            # run() switches the session to the CPU for good and retries there. A GPU replica that
            # quietly serves from the CPU is the fault this module refuses, so the failure is the
            # request's error instead (and the worker's next load shows the reason).
            self._session.disable_fallback()
        self.providers = tuple(self._session.get_providers())
        # onnxruntime-gpu builds a session even when libcudart/cudnn fail to load: it logs a warning
        # and runs on the CPU. That is the silent fallback this check turns into a load failure.
        if cuda and CUDA_PROVIDER not in self.providers:
            raise ArchiveError(
                f"{GPU_UNAVAILABLE}: device {self.device} but the ONNX Runtime session runs on "
                f"{list(self.providers)}"
                " (CUDA libraries missing or mismatched?); refusing to serve a GPU model on the CPU"
            )
        if not cuda:
            self.device = "cpu"  # e.g. mps: ONNX Runtime has no MPS provider; say where it runs
        got = tuple(i.name for i in self._session.get_inputs())
        if set(got) != set(self.input_names):
            raise ArchiveError(f"ONNX inputs {got} differ from the manifest's {self.input_names}")

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        feeds = {n: np.ascontiguousarray(inputs[n]) for n in self.input_names}
        outs = self._session.run(list(self.output_names), feeds)
        return dict(zip(self.output_names, outs, strict=True))


class CoreSlots:
    """The cores a model's workers on one host share, one lock file per core (`share_cores`).

    `claim()` takes every slot when all are free (the worker's runtime then runs on all its
    threads) and otherwise one (it waits for one when none is): a lone request gets every core,
    and under load each worker runs on one core beside the others instead of queueing for all of
    them or splitting them between more runtime threads than cores. The locks are flocks on files
    named by the model's directory, so every worker of one model version shares them, and the
    kernel frees a dead worker's slots whatever it was doing."""

    def __init__(self, key: str | Path, count: int, folder: str | Path | None = None):
        if count < 1:
            raise ValueError("a model shares at least one core")
        digest = hashlib.sha256(str(Path(key).resolve()).encode()).hexdigest()[:16]
        base = Path(folder or tempfile.gettempdir())
        paths = [base / f"ts-cores-{digest}-{i}.lock" for i in range(count)]
        try:
            self._fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o600) for p in paths]
        except OSError as e:
            raise ArchiveError(
                f"share_cores keeps its locks in TMPDIR ({base}), which the worker cannot write: {e}"
            ) from e

    def __len__(self) -> int:
        return len(self._fds)

    @contextmanager
    def claim(self) -> Iterator[int]:
        """Hold all slots or one for the block; yields how many are held."""
        held = [fd for fd in self._fds if _try_lock(fd)]
        if len(held) < len(self._fds):
            for fd in held[1:]:
                fcntl.flock(fd, fcntl.LOCK_UN)
            held = held[:1]
            if not held:
                # Every slot busy: wait for the first. With two workers the other holds both, and
                # frees them at once.
                fcntl.flock(self._fds[0], fcntl.LOCK_EX)
                held = [self._fds[0]]
        try:
            yield len(held)
        finally:
            for fd in held:
                fcntl.flock(fd, fcntl.LOCK_UN)


def core_slots(model_dir: str | Path, threads: int | None, share: bool) -> CoreSlots | None:
    """The slots a model's workers share when its settings say `share_cores` (one per thread)."""
    return CoreSlots(model_dir, threads or 1) if share else None


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@dataclass
class SharedCores:
    """One exported graph opened twice: on every shared core (`wide`) and on one (`narrow`); each
    call runs on the one that matches the slots it could claim. Only for graphs whose answers are
    bitwise the same on one thread and on many, so an answer never depends on the load: ONNX
    Runtime's CPU kernels split an op's outputs between threads, not the terms of one sum
    (tests/unit/test_core_slots.py holds it for each model's served answers)."""

    wide: Runtime
    narrow: Runtime
    slots: CoreSlots
    input_names: tuple[str, ...] = field(init=False)
    output_names: tuple[str, ...] = field(init=False)
    device: str = field(init=False)

    def __post_init__(self) -> None:
        self.input_names = self.wide.input_names
        self.output_names = self.wide.output_names
        self.device = self.wide.device

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self.slots.claim() as held:
            runtime = self.wide if held == len(self.slots) else self.narrow
            return runtime.run(inputs)


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
    slots: CoreSlots | None = None,
) -> Runtime:
    """Open the exported model of `kind` (see RUNTIME_FILES) found in `model_dir`. With `slots`
    (ONNX on the CPU), the model's workers share `len(slots)` cores (`SharedCores`)."""
    if kind not in RUNTIME_FILES:
        raise ArchiveError(f"runtime must be one of {sorted(RUNTIME_FILES)}, not {kind!r}")
    path = Path(model_dir) / (filename or RUNTIME_FILES[kind])
    if not path.is_file():
        raise ArchiveError(f"the archive has no {path.name} for runtime {kind!r}")
    names = (path, tuple(input_names), tuple(output_names))
    if kind in ONNX_KINDS:
        if fp16:
            raise ArchiveError("fp16 is a TorchScript option (runtime: torchscript on a GPU)")
        if slots is not None and device == "cpu":
            return SharedCores(
                OnnxRuntime(*names, device=device, threads=len(slots), spinning=spinning),
                OnnxRuntime(*names, device=device, threads=1, spinning=spinning),
                slots,
            )
        return OnnxRuntime(*names, device=device, threads=threads, spinning=spinning)
    if slots is not None and device == "cpu":
        # TorchScript's threads are the process's, and its kernels may sum in another order on
        # another thread count: each worker runs on one core, the shape shared cores take under load.
        log.info("share_cores: TorchScript on the CPU runs each worker on one thread")
        threads = 1
    return TorchScriptRuntime(*names, device=device, threads=threads, fp16=fp16)


def gpu_required(environ: dict | None = None) -> bool:
    """Whether this deployment declared that its workers must run on CUDA (`TS_REQUIRE_GPU`)."""
    value = (os.environ if environ is None else environ).get(REQUIRE_GPU_ENV, "")
    return value.strip().lower() in ("1", "true", "yes")


def cuda_unavailable_reason(torch) -> str:
    """Why torch sees no CUDA device, in torch's own words where it has some (an old driver: "The
    NVIDIA driver on your system is too old"; no device node: "Found no NVIDIA driver")."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is a CPU build"
    try:
        torch.cuda.init()
    except Exception as e:  # torch raises RuntimeError/AssertionError with the driver's story
        return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
    return f"torch {torch.__version__} (CUDA {torch.version.cuda}) found no usable CUDA device"


def device_from_properties(properties: dict, environ: dict | None = None) -> str:
    """TorchServe tells each worker its GPU in system_properties; never hard-code cuda:0. On an
    Apple laptop TorchServe hands out gpu_id too, and the accelerator is MPS.

    TorchServe hands out a gpu_id when it counted GPUs (nvidia-smi, capped by number_of_gpu), which
    says nothing about whether torch can use them; and where the container has no NVIDIA runtime it
    counts none and hands out nothing. So a deployment that exists to run on a GPU says so
    (`TS_REQUIRE_GPU=1`, the GPU overlay): then anything but a usable CUDA device is an ArchiveError
    that fails the worker's load (TorchServe reports the model not ready) with the reason. Without
    it, a gpu_id with no CUDA (a CPU torch on a GPU machine) runs on the CPU and says so in the log.
    """
    import torch

    required = gpu_required(environ)
    gpu_id = properties.get("gpu_id")
    if gpu_id is None:
        if required:
            raise ArchiveError(
                f"{GPU_UNAVAILABLE}: {REQUIRE_GPU_ENV}=1 but TorchServe gave this worker no "
                "gpu_id (it found no nvidia-smi, or number_of_gpu is 0): is the pod running "
                "with the NVIDIA runtime (runtimeClassName: nvidia) and an nvidia.com/gpu limit?"
            )
        return "cpu"
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        if int(gpu_id) >= count:
            raise ArchiveError(
                f"{GPU_UNAVAILABLE}: TorchServe gave this worker gpu_id {gpu_id} but torch sees "
                f"{count} CUDA device(s) (CUDA_VISIBLE_DEVICES / number_of_gpu disagree)"
            )
        return f"cuda:{int(gpu_id)}"
    if required:
        reason = cuda_unavailable_reason(torch)
        raise ArchiveError(
            f"{GPU_UNAVAILABLE}: {REQUIRE_GPU_ENV}=1 and TorchServe gave this worker gpu_id "
            f"{gpu_id}, but CUDA is unavailable: {reason}. Refusing to serve a GPU replica on the "
            "CPU (docs/kubernetes.md, GPU nodes)"
        )
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    log.warning(
        "gpu_id %s but torch has no CUDA (%s): this worker runs on the CPU; set %s=1 where a "
        "replica must run on its GPU",
        gpu_id,
        cuda_unavailable_reason(torch),
        REQUIRE_GPU_ENV,
    )
    return "cpu"
