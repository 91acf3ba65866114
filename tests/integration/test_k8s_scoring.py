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
