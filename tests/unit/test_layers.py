"""The layering (pyproject.toml [tool.importlinter]): serving code (handlers/) imports none of the
tools, training, clients, bench or tests, and no model's serving code imports another's, so an
archive that carries only its own model's folder serves (deploy/archive.py); the adapters (oip/,
scoring/) import the serving core, never the tools or training (scoring's commands: through
scoring/plugins.py only)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from handlers import registry

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=600
    )


def test_the_repository_keeps_every_layering_contract():
    out = lint_imports(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    names = [c["name"] for c in contracts["contracts"]]
    said = " ".join(out.stdout.split())  # lint-imports wraps a long contract name over lines
    assert len(names) == 5 and all(f"{n} KEPT" in said for n in names), out.stdout


def test_the_contracts_catch_serving_code_that_imports_a_tool_or_another_model(tmp_path):
    """The guard: the same contracts over a tree where handlers/ reaches training/ and one model's
    serving code imports another's (as handlers/sentiment/samples.py did) are broken."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    for package in contracts["root_packages"]:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "training" / "data.py").write_text("")
    for model in (*registry.names(), "kits"):
        (tmp_path / "handlers" / model).mkdir()
        (tmp_path / "handlers" / model / "__init__.py").write_text("")
    assert lint_imports(tmp_path).returncode == 0  # the bare tree keeps them
    (tmp_path / "handlers" / "sentiment" / "samples.py").write_text("import training.data\n")
    (tmp_path / "handlers" / "digits" / "model.py").write_text("import handlers.frequency\n")
    (tmp_path / "handlers" / "kits" / "image.py").write_text("import handlers.digits\n")
    (tmp_path / "scoring" / "job.py").write_text("import training.data\n")
    out = lint_imports(tmp_path)
    assert out.returncode != 0
    assert "handlers.sentiment.samples -> training.data" in out.stdout, out.stdout
    assert "handlers.digits.model -> handlers.frequency" in out.stdout, out.stdout
    assert "handlers.kits.image -> handlers.digits" in out.stdout, out.stdout
    assert "scoring.job -> training.data" in out.stdout, out.stdout
