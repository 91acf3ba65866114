"""`make test` asks the served full-size models (make check-served) once artifacts/ holds every
model, as after `make serve`, between the unit and the integration tier; otherwise it says why not."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tools.registry import names

ROOT = Path(__file__).resolve().parents[2]


def _make_n(artifacts: Path, ci: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "CI")}
    if ci:
        env["CI"] = "true"
    return subprocess.run(["make", "-n", "test", f"ARTIFACTS={artifacts}"], cwd=ROOT, env=env,
                          capture_output=True, text=True)  # fmt: skip


def _dry_run(artifacts: Path) -> str:
    done = _make_n(artifacts)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_make_test_checks_the_served_models_when_every_model_is_trained(tmp_path):
    for model in names():
        (tmp_path / model).mkdir()
        (tmp_path / model / "manifest.json").write_text("{}")
    lines = _dry_run(tmp_path).splitlines()
    check = next(i for i, line in enumerate(lines) if "-m deploy.check_served" in line)
    assert f"--artifacts {tmp_path}" in lines[check]
    unit = next(
        i for i, line in enumerate(lines) if "pytest -q -x --durations=10 tests/unit" in line
    )
    integration = [
        i
        for i, line in enumerate(lines)
        if "-m pytest" in line and line.rstrip().endswith(" tests/integration")
    ]
    assert len(integration) == 2, integration
    parallel, alone = (lines[i] for i in integration)
    # TEST_WORKERS' default: two processes, each file in one; then the files marked serial, which
    # bound a latency or a load, alone in pytest's own process. The two passes select every test.
    assert "-n 2 --dist loadfile" in parallel and '-m "not serial"' in parallel
    assert "-m serial" in alone and " -n " not in alone
    assert unit < check < integration[0] < integration[1]


def test_make_test_says_it_skips_the_check_while_a_model_is_untrained(tmp_path):
    first, *_ = names()
    (tmp_path / first).mkdir()
    (tmp_path / first / "manifest.json").write_text("{}")
    out = _dry_run(tmp_path)
    assert "deploy.check_served" not in out
    assert "check-served: artifacts/ does not hold every model" in out


def test_under_ci_make_test_fails_rather_than_skip_the_check_while_a_model_is_untrained(tmp_path):
    first, *rest = names()
    (tmp_path / first).mkdir()
    (tmp_path / first / "manifest.json").write_text("{}")
    # The line names $(MAKE), so even `make -n` runs it: it fails there, naming what is missing.
    done = _make_n(tmp_path, ci=True)
    assert done.returncode != 0
    assert "deploy.check_served" not in done.stdout
    line = next(x for x in done.stdout.splitlines() if "check-served: artifacts/" in x)
    assert f"missing: {' '.join(rest)}" in line and "under CI=true: failed" in line
    assert line.rstrip().endswith("exit 1") and "skipped" not in line
    assert f"missing: {' '.join(rest)}) under CI=true: failed" in done.stderr
