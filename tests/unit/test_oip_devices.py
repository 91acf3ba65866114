"""The OIP server spreads each model's workers over the GPUs as TorchServe does (worker i on GPU
i % number_of_gpu, handlers.runtime deciding what that GPU is), so the CUDA image's RUNTIME=oip
runs on its GPU, and a GPU replica (TS_REQUIRE_GPU=1) without one does not start on the CPU."""

from __future__ import annotations

import pytest
import torch

from handlers.runtime import ArchiveError
from oip.cli import parse_args
from oip.loading import worker_devices


def test_without_gpus_every_worker_runs_on_the_cpu():
    assert worker_devices(3, 0, {}) == ["cpu", "cpu", "cpu"]
    assert parse_args(["m.mar"]).gpus == 0


def test_workers_take_the_gpus_in_turn(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert worker_devices(3, 2, {}) == ["cuda:0", "cuda:1", "cuda:0"]
    assert worker_devices(2, 1, {}) == ["cuda:0", "cuda:0"]


@pytest.mark.parametrize("gpus", [0, 1])
def test_a_gpu_replica_without_a_usable_gpu_refuses_to_start(monkeypatch, gpus):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ArchiveError, match="GPU"):
        worker_devices(1, gpus, {"TS_REQUIRE_GPU": "1"})
