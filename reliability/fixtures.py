"""Pytest fixtures of the reliability and security suites (registered in tests/conftest.py).

The bad-input suite runs against the shared `served` server when the project provides it; the
fault and security suites start their own servers (they kill workers, fill queues, change config)
from the real archives when those fixtures exist. Where a fixture is not there yet, a model-free
stand-in archive that follows the same request contract takes its place, so the harness itself
stays tested; the report says which was used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from reliability.archives import build_stand_in
from tests.support.torchserve import TorchServe, start_torchserve
from tools import registry


@dataclass
class Target:
    server: TorchServe
    models: list[str]
    real: bool
    """False when the stand-in archive answers instead of the project's models."""


def optional_fixture(request: pytest.FixtureRequest, name: str):
    try:
        return request.getfixturevalue(name)
    except pytest.FixtureLookupError:
        return None


@pytest.fixture(scope="session")
def stand_in_archive(tmp_path_factory) -> Path:
    return build_stand_in(tmp_path_factory.mktemp("standin-archive"))


@pytest.fixture(scope="session")
def real_archives(request) -> dict[str, Path]:
    """{model: .mar} of the project's archives whose fixtures exist."""
    found = {}
    for model in registry.names():
        path = optional_fixture(request, f"{model}_archive")
        if path is not None:
            found[model] = Path(path)
    return found


@pytest.fixture(scope="session")
def fault_archive(real_archives, stand_in_archive) -> tuple[str, Path]:
    """One archive for destructive tests: the cheapest real model, else the stand-in."""
    for model in sorted(registry.names(), key=lambda m: registry.get(m).samples().load_cost):
        if model in real_archives:
            return model, real_archives[model]
    return "standin", stand_in_archive


@pytest.fixture(scope="session")
def fuzz_target(request, tmp_path_factory, stand_in_archive):
    served = optional_fixture(request, "served")
    if served is not None:
        yield Target(served, list(served.models), real=True)
        return
    server = start_torchserve(
        tmp_path_factory.mktemp("fuzz-standin"), {"standin": stand_in_archive}
    )
    try:
        yield Target(server, ["standin"], real=False)
    finally:
        server.stop()
