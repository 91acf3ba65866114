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
    return {name: render(name) for name in ("kserve", "cpu", "gpu", "oip")}


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


def containers(isvc: dict) -> tuple[dict, dict]:
    """(the door, the OIP server) of the predictor."""
    door, server = isvc["spec"]["predictor"]["containers"]
    return door, server


def test_the_predictor_is_the_serving_image_in_oip_mode_and_torchserve_stays_the_default(rendered):
    isvc = the(rendered, "kserve", "InferenceService")
    door, server = containers(isvc)
    cpu = the(rendered, "cpu", "Deployment")["spec"]["template"]["spec"]
    torchserve = next(c for c in cpu["containers"] if c["name"] == "torchserve")
    assert server["image"] == door["image"] == torchserve["image"]
    assert env_of(server)["RUNTIME"] == env_of(door)["RUNTIME"] == "oip"
    for overlay in ("cpu", "gpu"):
        pod = the(rendered, overlay, "Deployment")["spec"]["template"]["spec"]
        assert all(
            env_of(c).get("RUNTIME", "torchserve") == "torchserve" for c in pod["containers"]
        )
    assert isvc["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "RawDeployment"


def test_the_predictor_is_behind_the_pods_door_which_checks_the_tokens(rendered):
    isvc = the(rendered, "kserve", "InferenceService")
    spec = isvc["spec"]["predictor"]
    door, server = containers(isvc)
    volumes = {v["name"]: v for v in spec["volumes"]}
    # KServe's Service reaches the kserve-container's ports: the door (docker/proxy.sh).
    assert door["name"] == "kserve-container" and door["command"] == ["proxy.sh"]
    d, env = env_of(door), env_of(server)
    assert {p["name"]: p["containerPort"] for p in door["ports"]} == {
        "http1": int(d["PROXY_HTTP_PORT"]),
        "h2c": int(d["PROXY_GRPC_PORT"]),
        "metrics": int(d["PROXY_METRICS_PORT"]),
    }
    # The server on loopback (no OIP_HOST: the entrypoint's 127.0.0.1, no token of its own),
    # where the door looks for it, and no port of its own in the pod's spec.
    assert "OIP_HOST" not in env and "OIP_TOKEN_FILE" not in env and "ports" not in server
    assert d["TS_INFERENCE"] == f"127.0.0.1:{env['OIP_HTTP_PORT']}"
    assert d["TS_GRPC"] == f"127.0.0.1:{env['OIP_GRPC_PORT']}"
    assert d["TS_METRICS"] == f"127.0.0.1:{env['OIP_METRICS_PORT']}"
    annotations = isvc["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == d["PROXY_METRICS_PORT"]
    # The client tokens are the door's: the other overlays' Secret.
    mounts = {m["name"]: m for m in door["volumeMounts"]}
    tokens = next(n for n, m in mounts.items() if d["PROXY_TOKENS"].startswith(m["mountPath"]))
    assert volumes[tokens]["secret"]["secretName"] == "torchserve-client-tokens"
    assert tokens not in {m["name"] for m in server["volumeMounts"]}
    mounts = {m["name"]: m for m in server["volumeMounts"]}
    key = next(n for n, m in mounts.items() if m["mountPath"] == env["STREAM_STATE_HMAC_FILE"])
    assert volumes[key]["secret"]["secretName"] == "torchserve-stream-state-key"
    # Exec probes (probe.py reads RUNTIME=oip): the server's own on loopback, the door's through it.
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        command = server[probe]["exec"]["command"]
        assert command[0] == "probe.py"
        assert command[command.index("--inference") + 1] == d["TS_INFERENCE"].join(("http://", ""))
    command = door["readinessProbe"]["exec"]["command"]
    assert "--token-file" in command and any(a.endswith("/ready") for a in command)
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


def test_the_plain_deployment_overlay_runs_the_oip_server_behind_its_door(rendered):
    """k8s/overlays/oip: the cpu overlay's Deployment, RUNTIME=oip on both the serving container
    and the door (one switch for the entrypoint, proxy.sh and probe.py), nothing else changed."""
    assert schema_errors(rendered["oip"]) == []
    oip = the(rendered, "oip", "Deployment")["spec"]["template"]["spec"]
    cpu = the(rendered, "cpu", "Deployment")["spec"]["template"]["spec"]
    assert {c["name"]: env_of(c).get("RUNTIME") for c in oip["containers"]} == {
        "torchserve": "oip",
        "proxy": "oip",
    }
    for ours, theirs in zip(oip["containers"], cpu["containers"], strict=True):
        ours = copy.deepcopy(ours)
        ours["env"] = [e for e in ours["env"] if e["name"] != "RUNTIME"]
        assert ours == theirs
