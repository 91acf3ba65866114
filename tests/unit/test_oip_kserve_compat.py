"""The OIP server's changes to KServe's own code are written for one KServe release: the server
refuses to start on any other, naming both (oip/kserve_compat.py), and no shipped module of the
server carries test-only code."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from oip.kserve_compat import KSERVE_VERSION, KServeVersionError, check_version

ROOT = Path(__file__).resolve().parents[2]


def test_another_kserve_release_is_refused_naming_both_versions():
    with pytest.raises(KServeVersionError) as caught:
        check_version("0.22.1")
    assert "0.22.1" in str(caught.value) and KSERVE_VERSION in str(caught.value)


def test_the_release_it_was_written_for_passes_and_is_the_pinned_one():
    check_version(KSERVE_VERSION)
    for name in ("requirements-oip.txt", "requirements-oip-gpu.txt"):  # the CPU and GPU layers
        pins = re.findall(r"^kserve==(\S+)", (ROOT / name).read_text(), re.M)
        assert pins == [KSERVE_VERSION], (name, pins)


def test_no_shipped_oip_module_imports_unittest():
    for path in sorted((ROOT / "oip").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] == "unittest"], (path.name, names)
