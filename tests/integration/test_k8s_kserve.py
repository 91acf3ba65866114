"""The Open Inference Protocol runtime on KServe: k8s/overlays/kserve renders (`kubectl kustomize`)
to a KServe InferenceService whose custom predictor is the project's serving image in OIP mode, and
it validates against KServe's own SDK models (deploy/kserve_crds.py, in .venv-oip), which are shown
to catch the faults a strict apply would: unknown fields, wrong types, missing required fields."""

from __future__ import annotations

import copy

import pytest

from deploy import k8s_crds
from deploy.k8s_check import render, schema_errors

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rendered():
    return {name: render(name) for name in ("kserve", "cpu", "gpu")}


def the(rendered, overlay: str, kind: str) -> dict:
    (obj,) = [o for o in rendered[overlay].objects if o["kind"] == kind]
    return obj


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env", [])}


def test_the_kserve_overlay_renders_and_validates_strictly(rendered):
    isvc = the(rendered, "kserve", "InferenceService")
    assert k8s_crds.is_custom(isvc) and "KServe 0.21" in k8s_crds.label(isvc)
    assert schema_errors(rendered["kserve"]) == []


def faulty(isvc: dict, change) -> dict:
    broken = copy.deepcopy(isvc)
    change(broken)
    return broken


def test_the_kserve_check_catches_what_a_strict_apply_would(rendered):
    isvc = the(rendered, "kserve", "InferenceService")
    predictor = ("spec", "predictor")

    def at(obj: dict) -> dict:
        for key in predictor:
            obj = obj[key]
        return obj

    cases = {
        "minReplica": lambda o: at(o).update(minReplica=1),
        "maxReplicas": lambda o: at(o).update(maxReplicas="four"),
        "imagePullPolicyy": lambda o: at(o)["containers"][0].update(imagePullPolicyy="Always"),
        "containerPort": lambda o: at(o)["containers"][0]["ports"][0].update(containerPort="80"),
        "name": lambda o: at(o)["containers"][0].pop("name"),
        "predictorr": lambda o: o["spec"].update(predictorr={}),
    }
    # One run of the checker (in .venv-oip) over every faulty copy and the original.
    *found, clean = k8s_crds.kserve_errors([faulty(isvc, c) for c in cases.values()] + [isvc])
    for needle, errors in zip(cases, found, strict=True):
        assert any(needle in e for e in errors), (needle, errors)
    assert clean == []


def test_the_predictor_is_the_serving_image_in_oip_mode_and_torchserve_stays_the_default(rendered):
    isvc = the(rendered, "kserve", "InferenceService")
    (server,) = isvc["spec"]["predictor"]["containers"]
    cpu = the(rendered, "cpu", "Deployment")["spec"]["template"]["spec"]
    torchserve = next(c for c in cpu["containers"] if c["name"] == "torchserve")
    assert server["image"] == torchserve["image"]
    assert env_of(server)["RUNTIME"] == "oip"
    for overlay in ("cpu", "gpu"):
        pod = the(rendered, overlay, "Deployment")["spec"]["template"]["spec"]
        assert all(
            env_of(c).get("RUNTIME", "torchserve") == "torchserve" for c in pod["containers"]
        )
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"


def test_the_predictor_checks_the_client_tokens_and_shares_the_stream_key(rendered):
    isvc = the(rendered, "kserve", "InferenceService")
    spec = isvc["spec"]["predictor"]
    (server,) = spec["containers"]
    env = env_of(server)
    volumes = {v["name"]: v for v in spec["volumes"]}
    mounts = {m["name"]: m for m in server["volumeMounts"]}
    # On the pod's address, so the server checks tokens itself: the other overlays' Secret.
    assert env["OIP_HOST"] == "0.0.0.0"
    tokens = next(n for n, m in mounts.items() if env["OIP_TOKEN_FILE"].startswith(m["mountPath"]))
    assert volumes[tokens]["secret"]["secretName"] == "torchserve-client-tokens"
    key = next(n for n, m in mounts.items() if m["mountPath"] == env["STREAM_STATE_HMAC_FILE"])
    assert volumes[key]["secret"]["secretName"] == "torchserve-stream-state-key"
    ports = {p["containerPort"] for p in server["ports"]}
    assert ports == {int(env["OIP_HTTP_PORT"]), int(env["OIP_GRPC_PORT"])}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert server[probe]["httpGet"]["path"].startswith("/v2/health/")
    for c in spec["containers"] + spec["initContainers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_pull_init_container_reads_a_configmap_the_overlay_renders(rendered):
    isvc = the(rendered, "kserve", "InferenceService")
    (pull,) = isvc["spec"]["predictor"]["initContainers"]
    assert pull["command"][:4] == ["python", "-m", "deploy", "pull"] and "--all" in pull["args"]
    names = {o["metadata"]["name"] for o in rendered["kserve"].objects if o["kind"] == "ConfigMap"}
    refs = {s["configMapRef"]["name"] for s in pull["envFrom"]}
    assert refs <= names
