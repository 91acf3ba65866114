"""Policy checks over what `kubectl kustomize` renders for each overlay (make k8s adds checkov)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from deploy import k8s_crds
from deploy.k8s_check import overlays, render, schema_errors
from deploy.serving import read_properties
from handlers.frequency.state import KEY_FILE_ENV

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONFIG = read_properties(ROOT / "config.properties")
# What a pod needs beyond the repository's file (docs/kubernetes.md): TorchServe checks no tokens
# behind the pod proxy (every listener stays on loopback, metrics included: Prometheus scrapes
# through the proxy), and each overlay says how many GPUs TorchServe has.
POD_REWRITES = {"disable_token_authorization": "true"}
GPUS = {"cpu": "0", "gpu": "1"}


@pytest.fixture(scope="module")
def rendered():
    return {name: render(name) for name in overlays()}


def objects(rendered, overlay: str, kind: str) -> list[dict]:
    return [o for o in rendered[overlay].objects if o["kind"] == kind]


def pod(rendered, overlay: str) -> dict:
    (deployment,) = objects(rendered, overlay, "Deployment")
    return deployment["spec"]["template"]


def containers(spec: dict, init: bool = True) -> list[dict]:
    return spec["containers"] + (spec.get("initContainers", []) if init else [])


def secrets_mounted(spec: dict, container: dict) -> dict[str, dict]:
    """{secretName: volumeMount} for the Secrets a container mounts."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    return {
        volumes[m["name"]]["secret"]["secretName"]: m
        for m in container.get("volumeMounts", [])
        if "secret" in volumes[m["name"]]
    }


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def test_both_overlays_exist_and_pass_strict_schema_validation(rendered):
    assert {"cpu", "gpu"} <= rendered.keys()
    for overlay in rendered.values():
        assert schema_errors(overlay, ("1.37.0",)) == []


def test_gpu_overlay_requests_a_gpu_per_replica_and_tolerates_the_gpu_taint(rendered):
    spec = pod(rendered, "gpu")["spec"]
    ts = next(c for c in spec["containers"] if c["name"] == "torchserve")
    assert str(ts["resources"]["limits"]["nvidia.com/gpu"]) == "1"
    assert str(ts["resources"]["requests"]["nvidia.com/gpu"]) == "1"
    assert any(
        t["key"] == "nvidia.com/gpu" and t["effect"] == "NoSchedule" for t in spec["tolerations"]
    )
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert any("gpu" in e["key"] for t in terms["nodeSelectorTerms"] for e in t["matchExpressions"])


def test_cpu_overlay_requests_no_gpu_and_carries_no_gpu_toleration(rendered):
    spec = pod(rendered, "cpu")["spec"]
    for c in containers(spec):
        for section in ("requests", "limits"):
            assert "nvidia.com/gpu" not in c.get("resources", {}).get(section, {})
    assert not any("nvidia" in t.get("key", "") for t in spec.get("tolerations", []))
    assert "affinity" not in spec


def _matches(expression: dict, labels: dict[str, str]) -> bool:
    """One nodeSelectorRequirement, as the scheduler reads it (Gt/Lt compare integers)."""
    key, op, values = expression["key"], expression["operator"], expression.get("values", [])
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op == "NotIn":
        return labels.get(key) not in values
    if key not in labels:
        return False
    if op == "In":
        return labels[key] in values
    value, (bound,) = int(labels[key]), values
    return value > int(bound) if op == "Gt" else value < int(bound)


def schedulable(spec: dict, labels: dict[str, str]) -> bool:
    """Whether the pod's required node affinity accepts a node with these labels (terms are ORed,
    a term's expressions ANDed)."""
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return any(
        all(_matches(e, labels) for e in term["matchExpressions"])
        for term in terms["nodeSelectorTerms"]
    )


def gfd_node(compute: str, driver: str) -> dict[str, str]:
    """The labels NVIDIA GPU feature discovery puts on a GPU node (compute capability "8.0",
    driver "580.95.05")."""
    major, minor = compute.split(".")
    d_major, d_minor, d_rev = driver.split(".")
    return {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.compute.major": major,
        "nvidia.com/gpu.compute.minor": minor,
        "nvidia.com/cuda.driver-version.major": d_major,
        "nvidia.com/cuda.driver-version.minor": d_minor,
        "nvidia.com/cuda.driver-version.revision": d_rev,
        "nvidia.com/cuda.driver-version.full": driver,
    }


def driver_floor() -> int:
    """The oldest driver the GPU image's CUDA wheels run on, as requirements-gpu.txt states it."""
    text = (ROOT / "requirements-gpu.txt").read_text()
    (floor,) = re.findall(r"NVIDIA driver >= (\d+)", text)
    return int(floor)


@pytest.mark.parametrize(
    ("gpu", "compute", "driver", "accepted"),
    [
        ("P100 (Pascal)", "6.0", "580.95.05", False),
        ("V100 (Volta: CUDA 13 dropped it)", "7.0", "580.95.05", False),
        ("Jetson Xavier (Volta)", "7.2", "580.95.05", False),
        ("T4 (Turing)", "7.5", "580.95.05", True),
        ("A100", "8.0", "580.95.05", True),
        ("L4", "8.9", "590.44.01", True),
        ("H100 on a CUDA 12 driver", "9.0", "550.127.05", False),
        ("H100 one driver too old", "9.0", "575.57.08", False),
        ("B200", "10.0", "580.95.05", True),
        ("RTX PRO 6000 (Blackwell)", "12.0", "580.95.05", True),
    ],
)
def test_gpu_overlay_schedules_only_on_gpus_and_drivers_the_cuda_image_supports(
    rendered, gpu, compute, driver, accepted
):
    spec = pod(rendered, "gpu")["spec"]
    assert schedulable(spec, gfd_node(compute, driver)) is accepted, gpu


def test_gpu_overlay_driver_floor_is_the_one_requirements_gpu_states(rendered):
    spec = pod(rendered, "gpu")["spec"]
    floor = driver_floor()
    assert floor >= 580  # CUDA 13.0's minimum; cu130 wheels
    assert schedulable(spec, gfd_node("8.0", f"{floor}.0.1"))
    assert not schedulable(spec, gfd_node("8.0", f"{floor - 1}.0.1"))
    # A node GFD has not labelled (no GFD, or not yet) is not a GPU node to this Deployment.
    assert not schedulable(spec, {"nvidia.com/gpu.present": "true"})


def test_gpu_replicas_run_under_the_nvidia_runtime_and_refuse_the_cpu(rendered):
    spec = pod(rendered, "gpu")["spec"]
    assert spec["runtimeClassName"] == "nvidia"
    ts = next(c for c in spec["containers"] if c["name"] == "torchserve")
    assert {"name": "TS_REQUIRE_GPU", "value": "1"} in ts["env"]
    # The base's variables survive the overlay's env patch (merged by name, not replaced).
    assert {"TS_CONFIG_DIR", "TMPDIR", KEY_FILE_ENV} <= {e["name"] for e in ts["env"]}
    cpu = pod(rendered, "cpu")["spec"]
    assert "runtimeClassName" not in cpu
    assert all(e["name"] != "TS_REQUIRE_GPU" for c in containers(cpu) for e in c.get("env", []))


def test_gpu_overlay_keeps_capacity_during_rollouts_and_spreads_over_nodes_and_zones(rendered):
    (deployment,) = objects(rendered, "gpu", "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert objects(rendered, "gpu", "HorizontalPodAutoscaler") == [], "KEDA owns the HPA"
    (scaler,) = objects(rendered, "gpu", "ScaledObject")
    assert scaler["spec"]["minReplicaCount"] >= 2
    keys = {
        c["topologyKey"]
        for c in deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    }
    assert keys == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    assert ":0.1.0-gpu" in next(
        c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]
    )


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_configmap_carries_the_repository_config_except_the_documented_rewrites(rendered, overlay):
    (cm,) = [
        o
        for o in objects(rendered, overlay, "ConfigMap")
        if o["metadata"]["name"].startswith("torchserve-config")
    ]
    expected = CONFIG | POD_REWRITES | {"number_of_gpu": GPUS[overlay]}
    assert cm["data"] == expected
    # Without tokens, every TorchServe API stays on loopback inside the pod: the proxy is the only
    # way in (docs/kubernetes.md, threat model).
    assert cm["data"]["disable_token_authorization"] == "true"
    assert cm["data"]["inference_address"].startswith("http://127.0.0.1:")
    assert cm["data"]["management_address"].startswith("http://127.0.0.1:")
    assert cm["data"]["metrics_address"].startswith("http://127.0.0.1:")
    assert cm["data"]["grpc_inference_address"] == "127.0.0.1"
    assert cm["data"]["grpc_management_address"] == "127.0.0.1"


def test_kustomization_reads_an_identical_copy_of_config_properties():
    copy = ROOT / "k8s/base/config/config.properties"
    assert copy.read_bytes() == (ROOT / "config.properties").read_bytes(), (
        "k8s/base/config/config.properties differs from config.properties: run `make k8s`"
    )


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_clients_reach_only_the_pod_proxy_which_holds_the_client_tokens(rendered, overlay):
    spec = pod(rendered, overlay)["spec"]
    (proxy,) = [c for c in spec["containers"] if c.get("command", [])[:1] == ["proxy.sh"]]
    assert (ROOT / "docker/proxy.sh").is_file() and (ROOT / "docker/haproxy.cfg").is_file()
    holders = {
        c["name"]
        for c in containers(spec)
        if "torchserve-client-tokens" in secrets_mounted(spec, c)
    }
    assert holders == {proxy["name"]}, "only the proxy holds client tokens"
    mounts = {m["mountPath"] for m in proxy["volumeMounts"]}
    env = {e["name"]: e["value"] for e in proxy["env"]}
    assert env["PROXY_TOKENS"].rsplit("/", 1)[0] in mounts
    proxy_ports = {p["name"] for p in proxy["ports"]}
    (inference,) = [
        s for s in objects(rendered, overlay, "Service") if s["metadata"]["name"] == "torchserve"
    ]
    assert {p["targetPort"] for p in inference["spec"]["ports"]} == {"http", "grpc"}
    # Every port of the pod is the proxy's (metrics too: GET /metrics only, docker/haproxy.cfg).
    assert proxy_ports == {"http", "grpc", "metrics"}
    assert not [c["name"] for c in spec["containers"] if c is not proxy and c.get("ports")]


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_every_replica_signs_stream_states_with_the_key_from_one_secret(rendered, overlay):
    """A stream's next chunk may land on any pod: all must read the same signing key, from a
    Secret that is required (a missing one must stop the pod, not give it a key of its own)."""
    spec = pod(rendered, overlay)["spec"]
    (ts,) = [c for c in spec["containers"] if c["name"] == "torchserve"]
    path = {e["name"]: e.get("value") for e in ts["env"]}[KEY_FILE_ENV]
    mount = secrets_mounted(spec, ts)["torchserve-stream-state-key"]
    # subPath: fixed for the container's life, so a restarted worker keeps its siblings' key.
    assert mount["mountPath"] == path and mount["subPath"] and mount["readOnly"] is True
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert not volume["secret"].get("optional", False)
    assert all(
        "torchserve-stream-state-key" not in secrets_mounted(spec, c)
        for c in containers(spec)
        if c is not ts
    ), "only TorchServe's workers sign states"
    # config.properties' blacklist_env_vars keeps matching variables from the workers.
    blacklist = re.compile(CONFIG.get("blacklist_env_vars", "(?!)"))
    assert not blacklist.search(KEY_FILE_ENV)
    doc = (ROOT / "docs/kubernetes.md").read_text()
    assert "create secret generic torchserve-stream-state-key" in doc


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_every_probe_pings_the_inference_port_with_a_token(rendered, overlay):
    spec = pod(rendered, overlay)["spec"]
    proxy_ports = {
        p["containerPort"]
        for c in spec["containers"]
        for p in c.get("ports", [])
        if p["name"] == "http"
    }
    inference_ports = {port_of(CONFIG["inference_address"])} | proxy_ports
    probes = [
        (c["name"], kind, c[kind])
        for c in spec["containers"]
        for kind in ("startupProbe", "readinessProbe", "livenessProbe")
        if kind in c
    ]
    assert {kind for name, kind, _ in probes if name == "torchserve"} == {
        "startupProbe",
        "readinessProbe",
        "livenessProbe",
    }
    for name, kind, probe in probes:
        # httpGet/tcpSocket cannot send the replica's key: /ping needs it with token auth on.
        assert set(probe) & {"httpGet", "tcpSocket", "grpc"} == set(), f"{name} {kind}"
        cmd = probe["exec"]["command"]
        assert cmd[0] == "probe.py", f"{name} {kind}: {shlex.join(cmd)}"
        url = cmd[cmd.index("--inference") + 1]
        assert url.startswith("http://127.0.0.1:") and port_of(url) in inference_ports
    ts = next(c for c in spec["containers"] if c["name"] == "torchserve")
    assert ts["startupProbe"]["exec"]["command"][1] == "ready"
    budget = ts["startupProbe"]["periodSeconds"] * ts["startupProbe"]["failureThreshold"]
    assert budget >= 300, "model loading needs minutes before liveness takes over"
    assert "/ping" in (ROOT / "docker/probe.py").read_text()


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_no_service_or_container_port_exposes_the_management_api(rendered, overlay):
    management = {port_of(CONFIG["management_address"]), int(CONFIG["grpc_management_port"])}
    spec = pod(rendered, overlay)["spec"]
    named = {p["name"]: p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])}
    assert not management & set(named.values())
    services = objects(rendered, overlay, "Service")
    assert {s["metadata"]["name"] for s in services} == {"torchserve", "torchserve-metrics"}
    exposed = set()
    for s in services:
        for p in s["spec"]["ports"]:
            target = p.get("targetPort", p["port"])
            exposed |= {p["port"], named[target] if isinstance(target, str) else target}
    assert not exposed & management
    (inference,) = [s for s in services if s["metadata"]["name"] == "torchserve"]
    assert {p["port"] for p in inference["spec"]["ports"]} == {8080, 7070}
    (metrics,) = [s for s in services if s["metadata"]["name"] == "torchserve-metrics"]
    assert metrics["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    assert metrics["metadata"]["annotations"]["prometheus.io/port"] == str(named["metrics"])
    (policy,) = objects(rendered, overlay, "NetworkPolicy")
    allowed = {named[p["port"]] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert allowed and not allowed & management
    assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "torchserve"


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_init_containers_pull_every_model_the_config_loads_into_the_served_store(rendered, overlay):
    spec = pod(rendered, overlay)["spec"]
    # load_models=all serves the store; the init container fills it with every registered model.
    assert CONFIG["load_models"] == "all"
    dests = set()
    (init,) = spec["initContainers"]
    argv = init["command"] + init["args"]
    assert argv[:5] == ["python", "-m", "deploy", "pull", "--all"]
    dests.add(argv[argv.index("--dest") + 1])
    assert "--stage" in argv
    (ts,) = [c for c in spec["containers"] if c["name"] == "torchserve"]
    store = {m["name"]: m["mountPath"] for m in ts["volumeMounts"]}["model-store"]
    # config.properties names model_store relative to TorchServe's working dir (the "work" mount).
    workdir = {m["name"]: m["mountPath"] for m in ts["volumeMounts"]}["work"]
    assert dests == {store} == {f"{workdir}/{CONFIG['model_store']}"}


@pytest.mark.parametrize("overlay", ["cpu", "gpu"])
def test_pods_are_hardened_and_disruptions_are_bounded(rendered, overlay):
    template = pod(rendered, overlay)
    spec = template["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert spec["automountServiceAccountToken"] is False
    for c in containers(spec):
        sc = c["securityContext"]
        assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert {"cpu", "memory"} <= c["resources"]["requests"].keys() & c["resources"][
            "limits"
        ].keys()
        assert ":" in c["image"] and not c["image"].endswith(":latest")
    volumes = {v["name"]: v for v in spec["volumes"]}
    ts = next(c for c in spec["containers"] if c["name"] == "torchserve")
    writable = {m["mountPath"] for m in ts["volumeMounts"] if "emptyDir" in volumes[m["name"]]}
    assert {"/tmp", "/home/model-server/work", "/home/model-server/work/model_store"} <= writable
    pre_stop = ts["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep" and spec["terminationGracePeriodSeconds"] > int(pre_stop[1]) + 30
    (pdb,) = objects(rendered, overlay, "PodDisruptionBudget")
    labels = template["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (sa,) = objects(rendered, overlay, "ServiceAccount")
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    assert sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith("arn:aws:iam::")


def test_gpu_overlay_scales_the_deployment_on_torchserve_queue_time(rendered):
    (deployment,) = objects(rendered, "gpu", "Deployment")
    (scaler,) = objects(rendered, "gpu", "ScaledObject")
    assert scaler["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    target = scaler["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    (trigger,) = scaler["spec"]["triggers"]
    assert trigger["type"] == "prometheus" and trigger["metricType"] == "Value"
    query = trigger["metadata"]["query"]
    # Counters declared in metrics.yaml, i.e. exported by every pod.
    declared = (ROOT / "metrics.yaml").read_text()
    for metric in ("ts_queue_latency_microseconds", "ts_inference_requests_total"):
        assert metric in query and f"name: {metric}" in declared
    assert float(trigger["metadata"]["threshold"]) > 0
    assert "cpu" not in query.lower()


def test_custom_resources_are_validated_strictly_not_skipped(rendered):
    (scaler,) = objects(rendered, "gpu", "ScaledObject")
    assert k8s_crds.is_custom(scaler) and k8s_crds.errors(scaler) == []
    typo = {**scaler, "spec": {**scaler["spec"], "minReplicas": 2}}
    assert any("minReplicas" in e for e in k8s_crds.errors(typo))
    wrong_type = {**scaler, "spec": {**scaler["spec"], "maxReplicaCount": "eight"}}
    assert any("maxReplicaCount" in e for e in k8s_crds.errors(wrong_type))
    (trigger,) = scaler["spec"]["triggers"]
    bad = {**trigger, "metadata": {**trigger["metadata"], "threshold": "lots", "querry": "x"}}
    bad_scaler = {**scaler, "spec": {**scaler["spec"], "triggers": [bad]}}
    found = " ".join(k8s_crds.errors(bad_scaler))
    assert "threshold" in found and "querry" in found


def test_cpu_overlay_matches_its_walkthrough(rendered):
    """docs/kubernetes.md's kind/minikube steps: side-loaded image, MinIO address, bucket, stage."""
    doc = (ROOT / "docs/kubernetes.md").read_text()
    spec = pod(rendered, "cpu")["spec"]
    assert {c["imagePullPolicy"] for c in containers(spec)} == {"IfNotPresent"}
    assert "kind load docker-image" in doc
    (source,) = [
        o
        for o in objects(rendered, "cpu", "ConfigMap")
        if o["metadata"]["name"].startswith("model-source")
    ]
    data = source["data"]
    assert data["AWS_ENDPOINT_URL"] in doc
    assert f"BUCKET={data['MODEL_BUCKET']}" in doc and f"`{data['MODEL_BUCKET']}`" in doc
    promoted = set(re.findall(r"deploy promote \S+ <VERSION> --stage (\S+)", doc))
    assert promoted == {data["MODEL_STAGE"]}
    # The walkthrough's request carries a Content-Type (TorchServe answers 415 without one).
    curl = next(b for b in doc.split("curl ")[1:] if "/predictions/" in b[:300])
    assert "Content-Type: application/json" in curl.split("-d ")[0]
    assert "--load-restrictor" not in doc and "kubectl apply -k k8s/overlays/gpu" in doc
