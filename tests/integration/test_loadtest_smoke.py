"""A few seconds of the real locustfile against the shared TorchServe, both users, headless."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.torchserve import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.serial]


def run_locust(served, out: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADTEST_")} | {
        "PYTHONPATH": str(ROOT)
    }
    cmd = [
        str(Path(sys.executable).with_name("locust")),
        "-f", str(ROOT / "loadtests" / "locustfile.py"),
        "--headless", "--only-summary",
        "--ts-config", str(Path(served.workdir) / "config.properties"),
        "--csv", str(out / "smoke"),
        "--html", str(out / "smoke.html"),
        "--slo-report", str(out / "slo.json"),
        *args,
    ]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=180, cwd=ROOT)


def test_smoke_load_exercises_both_protocols_without_failures(served, tmp_path):
    run = run_locust(
        served, tmp_path,
        "--shape", "steady", "--peak-users", "4", "--ramp-s", "1", "--duration-s", "6",
        "--models", "sentiment:3,frequency:1" if "frequency" in served.models else "sentiment:1",
        "--slo-p95-ms", "60000",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    verdict = json.loads((tmp_path / "slo.json").read_text())
    assert verdict["passed"] and verdict["failures"] == 0
    assert verdict["by_protocol"].get("REST", 0) > 0 and verdict["by_protocol"].get("GRPC", 0) > 0
    with (tmp_path / "smoke_stats.csv").open() as f:
        rows = {(r["Type"], r["Name"]): int(r["Request Count"]) for r in csv.DictReader(f)}
    assert rows[("REST", "sentiment")] > 0 and rows[("GRPC", "sentiment")] > 0
    assert (tmp_path / "smoke.html").stat().st_size > 0


def test_slo_gate_fails_the_run_when_p95_is_over_the_bound(served, tmp_path):
    run = run_locust(
        served, tmp_path,
        "--peak-users", "2", "--ramp-s", "1", "--duration-s", "3", "--models", "sentiment:1",
        "--slo-p95-ms", "0.001",
    )  # fmt: skip
    assert run.returncode == 1, run.stderr[-3000:]
    verdict = json.loads((tmp_path / "slo.json").read_text())
    assert not verdict["passed"] and any("p95" in v for v in verdict["violations"])
