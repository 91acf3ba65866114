"""Which CPU a figure came from: its model and the instruction-set flags that decide its speed.

Training (metrics.json, manifest.json, MLflow params) and `make bench` (reports/bench.*) write the
same description, so every timing names its CPU class. The same model name can hide different
classes (a cloud "AMD EPYC" with or without AVX-512 BF16), so the flags are what to compare.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from handlers.runtime import cpu_info

SPEED_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
"""The /proc/cpuinfo flags oneDNN and ONNX Runtime choose their kernels by (bf16 and int8 matmuls
above all): the ones a report lists."""

# Most capable first: the first class whose flags are all present names the CPU.
CLASSES = (
    ("AMX", ("amx_tile", "amx_bf16")),
    ("AVX-512 BF16", ("avx512f", "avx512_bf16")),
    ("AVX-512 VNNI", ("avx512f", "avx512_vnni")),
    ("AVX-512", ("avx512f",)),
    ("AVX2", ("avx2",)),
)


def cpu_class(flags: set[str] | list[str]) -> str:
    """'AMX', 'AVX-512 BF16', 'AVX-512 VNNI', 'AVX-512', 'AVX2' or the architecture's name."""
    for name, needed in CLASSES:
        if set(needed) <= set(flags):
            return name
    return platform.machine() or "unknown"


def describe_cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict:
    """{"model", "class", "flags" (those of SPEED_FLAGS present), "cpus", "isa_limit"}.

    isa_limit: ONEDNN_MAX_CPU_ISA when set (e.g. AVX2 to measure an AVX2-only machine's speed
    on a bigger CPU): oneDNN then ignores the flags above it, so the class is capped in name too.
    """
    model, flags = cpu_info(cpuinfo)
    present = [f for f in SPEED_FLAGS if f in flags]
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA", "")
    return {
        "model": model or platform.processor() or platform.machine() or "unknown",
        "class": cpu_class(present) + (f" (oneDNN capped at {limit})" if limit else ""),
        "flags": present,
        "cpus": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "isa_limit": limit or None,
    }


def cpu_summary(cpu: dict) -> str:
    """One line for a report: 'AMD EPYC, AVX2 (avx2 fma), 2 CPUs'."""
    flags = " ".join(cpu.get("flags") or []) or "no listed flags"
    return f"{cpu.get('model')}, {cpu.get('class')} ({flags}), {cpu.get('cpus')} CPUs"


if __name__ == "__main__":  # python -m training.common.machine: this machine's line and details
    import json

    cpu = describe_cpu()
    print(cpu_summary(cpu))
    print(json.dumps(cpu, indent=2))
