"""Who used the cores during a measurement: the load generator (this process), TorchServe's Java
frontend and its Python workers, as CPU-seconds per wall second ("cores"). The load generator
shares the machine with the server, so its share is part of every served figure."""

from __future__ import annotations

import time

import psutil


def _cpu(proc: psutil.Process) -> float:
    try:
        t = proc.cpu_times()
        return t.user + t.system
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return 0.0


def _role(proc: psutil.Process) -> str | None:
    try:
        name, cmd = proc.name(), " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None
    if "java" in name or "model-server.jar" in cmd or "org.pytorch.serve" in cmd:
        return "frontend"
    if "model_service_worker" in cmd:
        return "workers"
    return None


class CpuMeter:
    """`start()` then `stop()` → {"loadgen": cores, "frontend": cores, "workers": cores}."""

    def __init__(self, server_pid: int | None):
        self.me = psutil.Process()
        self.server = psutil.Process(server_pid) if server_pid else None

    def _snapshot(self) -> dict[str, float]:
        totals = {"loadgen": _cpu(self.me), "frontend": 0.0, "workers": 0.0}
        if self.server is not None:
            for child in self.server.children(recursive=True):
                role = _role(child)
                if role:
                    totals[role] += _cpu(child)
        return totals

    def start(self) -> None:
        self._t0, self._s0 = time.perf_counter(), self._snapshot()

    def stop(self) -> dict[str, float]:
        wall = time.perf_counter() - self._t0
        s1 = self._snapshot()
        return {k: round((s1[k] - self._s0[k]) / wall, 3) for k in s1} | {"seconds": wall}
