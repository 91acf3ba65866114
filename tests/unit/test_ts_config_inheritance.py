"""Nothing that starts TorchServe with its own config may inherit the caller's TS_CONFIG_FILE.

TorchServe 0.12 prefers TS_CONFIG_FILE to --ts-config, and an activated venv sets it to the
checkout's config.properties (deploy/venv-activate.sh): a pod, a test server or a rehearsal replica
that inherits it serves the checkout's ports and settings instead of its own.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from rehearsal.pod import Pod

ROOT = Path(__file__).resolve().parents[2]
FOREIGN = "/elsewhere/config.properties"


def test_the_entrypoint_runs_torchserve_on_its_own_config_not_an_inherited_one(tmp_path):
    seen = tmp_path / "seen"
    fake = tmp_path / "bin" / "torchserve"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$TS_CONFIG_FILE $*" >> {seen}\n')
    fake.chmod(0o755)
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "inference_address").write_text("http://127.0.0.1:1")
    work = tmp_path / "work"
    env = os.environ | {
        "PATH": f"{fake.parent}:{os.environ['PATH']}",
        "TS_CONFIG_FILE": FOREIGN,  # what an activated venv exports
        "TS_WORKDIR": str(work),
        "TS_CONFIG_DIR": str(config_dir),
        "TS_APP_DIR": str(ROOT),
        "TMPDIR": str(tmp_path / "tmp"),
    }
    out = subprocess.run(
        [str(ROOT / "docker/entrypoint.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    config, *args = seen.read_text().split()
    assert config == str(work / "config.properties")
    assert args[args.index("--ts-config") + 1] == config


def test_a_rehearsal_pod_does_not_pass_the_callers_ts_config_file_on(tmp_path, monkeypatch):
    monkeypatch.setenv("TS_CONFIG_FILE", FOREIGN)
    assert "TS_CONFIG_FILE" not in Pod(tmp_path, archives={}, tokens=[], config={})._env()


def test_every_torchserve_started_with_ts_config_also_sets_ts_config_file():
    """A new launcher (script, fixture, tool) must decide TS_CONFIG_FILE itself, as these do."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.py", "*.sh", "Makefile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    here = Path(__file__).relative_to(ROOT).as_posix()
    launchers = [
        f
        for f in tracked
        if f != here
        and (ROOT / f).is_file()
        and re.search(r"--start\b.*--ts-config", (ROOT / f).read_text())
    ]
    assert {"docker/entrypoint.sh", "tests/support/torchserve.py"} <= set(launchers)
    unguarded = [f for f in launchers if "TS_CONFIG_FILE" not in (ROOT / f).read_text()]
    assert not unguarded, f"start TorchServe but leave TS_CONFIG_FILE to the caller: {unguarded}"


def test_the_entrypoint_starts_torchserve_without_the_images_pythonpath(tmp_path):
    """The image's PYTHONPATH (/opt/torchserve/app, with a copy of handlers/) would come before the
    unpacked archive in every worker's sys.path and shadow the archive's code."""
    seen = tmp_path / "seen"
    fake = tmp_path / "bin" / "torchserve"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "${{PYTHONPATH-unset}}" >> {seen}\n')
    fake.chmod(0o755)
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    (config_dir / "inference_address").write_text("http://127.0.0.1:1")
    env = os.environ | {
        "PATH": f"{fake.parent}:{os.environ['PATH']}",
        "PYTHONPATH": "/opt/torchserve/app",  # the image's ENV
        "TS_WORKDIR": str(tmp_path / "work"),
        "TS_CONFIG_DIR": str(config_dir),
        "TS_APP_DIR": str(ROOT),
        "TMPDIR": str(tmp_path / "tmp"),
    }
    out = subprocess.run(
        [str(ROOT / "docker/entrypoint.sh")], env=env, capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0, out.stderr
    assert seen.read_text().split() == ["unset"]
