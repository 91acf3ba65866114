"""Each .mar carries only what serves it: the shared serving core (handlers/*.py), its own model's
folder and handler file, and its artifacts; no other model's code and no tools. A worker that has
only that (the registry included) loads and serves, and the archive's code wins over a copy of
handlers/ on PYTHONPATH (the serving image has one at /opt/torchserve/app)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
import requests

from deploy.archive import serving_files
from handlers.registry import get as spec_of
from rehearsal.pod import Pod, pod_config
from tools.registry import get, names

pytestmark = pytest.mark.integration

MODELS = ("sentiment", "frequency", "digits", "tabular")


@pytest.fixture(scope="module", params=MODELS)
def archive(request) -> tuple[str, Path]:
    model = request.param
    return model, request.getfixturevalue(f"{model}_archive")


def code_in(mar: Path) -> set[str]:
    with zipfile.ZipFile(mar) as z:
        return {n for n in z.namelist() if n.endswith(".py") or n.startswith("handlers/")}


def test_an_archive_carries_the_serving_core_and_its_own_model_only(archive):
    model, mar = archive
    code = code_in(mar)
    want = {str(p) for p in serving_files(model)}
    assert {n for n in code if n.startswith("handlers/")} == want
    assert f"handlers/{model}/model.py" in code and "handlers/service.py" in code
    for other in set(names()) - {model}:
        assert not any(n.startswith(f"handlers/{other}/") for n in code), other
        assert not any(n.endswith(f"{other}_handler.py") for n in code), other
    assert not any(n.startswith(("tools/", "training/", "clients/", "bench/")) for n in code)
    # The kits its registry line names, and no other (sentiment: the text kit; frequency: the
    # signal kit; digits: the image kit).
    kits = {n.split("/")[2] for n in code if n.startswith("handlers/kits/") and n.count("/") > 2}
    assert kits == set(spec_of(model).kits) == set(get(model).kits), kits
    assert ("handlers/kits/text/explain.py" in code) == (model == "sentiment")
    with zipfile.ZipFile(mar) as z:
        manifest = json.loads(z.read("MAR-INF/MANIFEST.json"))
    assert manifest["model"]["handler"] == f"{model}_handler.py"


def test_only_the_unpacked_archive_loads_the_model_and_its_registry(archive, tmp_path):
    """A worker's view: nothing of the repository on sys.path, only the unpacked archive. The
    registry lists every model (it imports none) and loads this one."""
    model, mar = archive
    with zipfile.ZipFile(mar) as z:
        z.extractall(tmp_path)
    script = f"""
import sys
sys.path.insert(0, {str(tmp_path)!r})
import handlers
assert handlers.__file__.startswith({str(tmp_path)!r}), handlers.__file__
from handlers import registry
from handlers.service import ModelService
print(" ".join(registry.names()))
import {model}_handler
service = ModelService.from_dir({str(tmp_path)!r})
print(type(service.model).__name__)
for other in set(registry.names()) - {{{model!r}}}:
    try:
        registry.get(other).spec()
    except ModuleNotFoundError:
        print("absent", other)
"""
    out = subprocess.run(
        [sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    assert lines[0].split() == names()
    assert lines[1] == get(model).spec().model.__name__
    assert sorted(x.split()[1] for x in lines[2:] if x) == sorted(set(names()) - {model})


def test_in_the_pod_the_archives_code_wins_over_the_images_copy_of_handlers(
    digits_archive, tmp_path, monkeypatch
):
    """The serving image puts /opt/torchserve/app (with handlers/, for `python -m deploy`) on
    PYTHONPATH, and TorchServe 0.12 puts a worker's PYTHONPATH before the unpacked archive: that
    copy shadowed the archive's code. Here the image's copy is a decoy that fails on import, and
    the real entrypoint (docker/entrypoint.sh, as the pod runs it) serves the archive's code."""
    decoy = tmp_path / "image-app"
    (decoy / "handlers").mkdir(parents=True)
    (decoy / "handlers" / "__init__.py").write_text(
        "raise ImportError('the copy of handlers/ on PYTHONPATH was imported')\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(decoy))  # the image's ENV
    pod = Pod(tmp_path / "pod", {"digits": digits_archive}, [], pod_config("cpu"))
    pod.start_torchserve()
    try:
        deadline = time.monotonic() + 240
        while pod.probe("ready").returncode != 0:
            assert pod.procs["torchserve"].poll() is None, pod.tail()
            assert time.monotonic() < deadline, pod.tail()
            time.sleep(0.5)
        r = requests.post(
            f"{pod.inference}/predictions/digits", json={"image": [[0] * 8] * 8}, timeout=60
        )
        assert r.status_code == 200, r.text
        assert "label" in r.json()
        log = (pod.work / "logs" / "model_log.log").read_text()
        assert "the copy of handlers/" not in log
    finally:
        pod.kill()
