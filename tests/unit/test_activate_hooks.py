"""The venv's activate scripts set TS_CONFIG_FILE to the checkout's config.properties and run
`torchserve` from the checkout's root, in every shell venv supports; `deactivate` takes both away.

Each test writes the hooks (`make activate-hooks`) into a fresh venv of its own, never the project's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What each shell runs: activate, show the config and where `torchserve` runs, deactivate, show again.
SCRIPTS = {
    "bash": ". {venv}/bin/activate",
    "dash": ". {venv}/bin/activate",
    "zsh": ". {venv}/bin/activate",
    "fish": "source {venv}/bin/activate.fish",
    "tcsh": "source {venv}/bin/activate.csh",
}
SHOW = {
    "fish": 'echo "config=$TS_CONFIG_FILE"; torchserve --version',
    "tcsh": 'if ($?TS_CONFIG_FILE) echo "config=$TS_CONFIG_FILE"\ntorchserve --version',
}
SHOW_AFTER = {
    "fish": 'echo "after=$TS_CONFIG_FILE"; type -q torchserve; and functions -q torchserve; and echo wrapped',
    "tcsh": 'if (! $?TS_CONFIG_FILE) echo "after="\nalias torchserve',
}
POSIX_SHOW = 'echo "config=$TS_CONFIG_FILE"; torchserve --version'
POSIX_AFTER = 'echo "after=${TS_CONFIG_FILE:-}"; command -V torchserve'


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """A folder with a venv in .venv, hooks written by the Makefile twice (idempotent), and a fake
    `torchserve` in the venv that prints the folder it runs in."""
    root = tmp_path_factory.mktemp("checkout")
    venv = root / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    for _ in range(2):
        subprocess.run(
            ["make", "-s", "-C", str(ROOT), "activate-hooks", f"VENV={venv}"],
            check=True,
            capture_output=True,
        )
    fake = venv / "bin" / "torchserve"
    fake.write_text('#!/bin/sh\necho "ran in $(pwd -P)"\n')
    fake.chmod(0o755)
    return root


def run_in(shell: str, checkout: Path, where: Path) -> str:
    exe = shutil.which(shell)
    assert exe, f"{shell} is not installed: `make install` installs every supported shell"
    activate = SCRIPTS[shell].format(venv=".venv" if where == checkout else checkout / ".venv")
    body = "\n".join(
        [activate, SHOW.get(shell, POSIX_SHOW), "deactivate", SHOW_AFTER.get(shell, POSIX_AFTER)]
    )
    # tcsh reads the script from stdin (-f: no ~/.tcshrc); the others take it as -c.
    cmd, stdin = ([exe, "-f"], body) if shell == "tcsh" else ([exe, "-c", body], None)
    out = subprocess.run(cmd, input=stdin, cwd=where, capture_output=True, text=True, timeout=30)
    assert "Bad substitution" not in out.stderr, out.stderr
    return out.stdout + out.stderr


@pytest.mark.parametrize("shell", list(SCRIPTS))
def test_activate_sets_the_checkouts_config_and_deactivate_takes_it_away(shell, checkout, tmp_path):
    out = run_in(shell, checkout, tmp_path)  # activated from another folder
    lines = out.splitlines()
    assert f"config={checkout / 'config.properties'}" in lines, out
    assert f"ran in {checkout.resolve()}" in lines, out  # `torchserve` runs from the checkout
    assert "after=" in lines, out
    assert "function" not in out.split("after=", 1)[1] and "wrapped" not in out, out


def test_the_hooks_are_written_once_however_often_make_install_runs(checkout):
    for name in ("activate", "activate.fish", "activate.csh"):
        text = (checkout / ".venv" / "bin" / name).read_text()
        assert text.count(">>> torchserve-deploy") == 1, name
        takeaway = ("unset TS_CONFIG_FILE", "set -e TS_CONFIG_FILE", "unsetenv TS_CONFIG_FILE")
        assert sum(text.count(line) for line in takeaway) == 1, name  # in deactivate, once
