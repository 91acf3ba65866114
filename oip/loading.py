"""Where each served model comes from and which devices its workers run on, as TorchServe
decides them: an archive (.mar, unpacked) or an artifact folder, and worker i on GPU i % gpus."""

from __future__ import annotations

from pathlib import Path

from handlers.archive import unpack
from handlers.manifest import read_manifest


def load(source: str, work: Path) -> tuple[str, Path]:
    """NAME=PATH or PATH; a .mar is unpacked into `work`. → (served name, model dir)."""
    name, _, path_text = source.rpartition("=") if "=" in source else ("", "", source)
    path = Path(path_text)
    if path.suffix == ".mar":
        name = name or path.stem
        path = unpack(path, work / name)
    if not name:
        name = str(read_manifest(path).get("model", path.name))
    return name, path


def worker_devices(workers: int, gpus: int, environ: dict | None = None) -> list[str]:
    """Each worker's device, as TorchServe hands them out: worker i gets GPU i % gpus
    (config.properties' number_of_gpu), none without GPUs; handlers.runtime decides what that GPU
    is (cuda:i where torch sees it, else the CPU, said in the log; with TS_REQUIRE_GPU=1 anything
    but a usable CUDA device is an ArchiveError: the server does not start, saying why)."""
    from handlers.runtime import device_from_properties

    return [
        device_from_properties({"gpu_id": i % gpus} if gpus > 0 else {}, environ)
        for i in range(workers)
    ]
