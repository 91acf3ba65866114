"""k8s/scoring: the KubeRay RayJob rendered by `kubectl kustomize` and validated strictly (the
RayJob fields by deploy/kuberay.py's models of the ray.io/v1 CRD, the pod templates by
kubernetes-validate), running the same `python -m scoring` command with --address."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from deploy import kuberay
from deploy.k8s_check import kubectl

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rayjob() -> dict:
    out = subprocess.run([kubectl(), "kustomize", str(ROOT / "k8s" / "scoring")],
                         capture_output=True, text=True, check=True)  # fmt: skip
    [job] = [o for o in yaml.safe_load_all(out.stdout) if o and kuberay.is_rayjob(o)]
    return job


def test_the_rendered_rayjob_validates(rayjob):
    assert kuberay.errors(rayjob) == []
    assert rayjob["metadata"]["namespace"] == "torchserve"
    assert "python -m scoring" in rayjob["spec"]["entrypoint"]
    assert "--address" in rayjob["spec"]["entrypoint"]
    image = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert image["image"].startswith("registry.example.com/ml/torchserve-models:")


def test_the_ray_version_is_the_pinned_one(rayjob):
    pins = (ROOT / "requirements.txt").read_text()
    assert f"ray[data]=={rayjob['spec']['rayClusterSpec']['rayVersion']}" in pins


@pytest.mark.parametrize(
    "path, value",
    [
        (("spec", "entrypointt"), "x"),  # a field the CRD does not declare
        (("spec", "submissionMode"), "BatchMode"),  # not one of the CRD's enum
        (("spec", "backoffLimit"), "2"),  # a string where the CRD wants an integer
    ],
)
def test_a_broken_rayjob_is_caught(rayjob, path, value):
    broken = copy.deepcopy(rayjob)
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert kuberay.errors(broken)


def test_a_broken_pod_template_is_caught(rayjob):
    broken = copy.deepcopy(rayjob)
    group = broken["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    group["template"]["spec"]["containers"][0]["resources"]["limit"] = {"cpu": "2"}
    assert any("pod template" in e for e in kuberay.errors(broken))


def test_make_k8s_renders_and_checks_the_scoring_job(tmp_path, monkeypatch, capsys):
    from deploy import k8s_check

    monkeypatch.setattr(k8s_check, "overlays", lambda: [])  # the scoring job alone, for speed
    assert k8s_check.main(["--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "scoring: 1 objects" in out and "1 custom: RayJob (ray.io/v1 RayJob" in out
    assert "0 schema errors" in out and out.rstrip().endswith("k8s check: OK")
    assert kuberay.is_rayjob(yaml.safe_load((tmp_path / "scoring.yaml").read_text()))


def test_make_k8s_reports_a_broken_rayjob():
    from deploy.k8s_check import Rendered, render, schema_errors

    rendered = render("scoring")
    assert schema_errors(rendered) == []
    broken = Rendered("scoring", rendered.text.replace("K8sJobMode", "BatchMode"))
    [error] = schema_errors(broken)
    assert (
        error.startswith("scoring: RayJob/score-sentiment (ray.io/v1 RayJob")
        and "submissionMode" in error
    )
