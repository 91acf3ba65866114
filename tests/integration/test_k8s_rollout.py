"""The Argo Rollouts overlays (k8s/components/rollout): what they render, checked against Argo
Rollouts' own CRD schemas (deploy/argo_rollouts.py) and against what the pods export."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from deploy import argo_rollouts
from deploy.k8s_check import Rendered, render, schema_errors
from deploy.mirror import JUDGE_HEADER as MIRROR_JUDGE_HEADER
from deploy.mirror import PORT as MIRROR_PORT
from deploy.mirror import k8s_config as mirror_k8s_config
from deploy.rollout import RUNTIMES
from handlers import registry

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
OVERLAYS = ("rollout", "rollout-oip")
WEIGHTS = [5, 25, 50, 100]
HASH = "rollouts_pod_template_hash"
# The Prometheus thresholds each step passes, by the key of handlers/<model>/rollout.yaml that
# holds the same number (the judge reads that file itself).
THRESHOLD_KEYS = {
    "max-error-rate-increase": "max_error_rate_increase",
    "max-p99-ratio": "max_p99_ratio",
    "p99-floor-s": "p99_floor_s",
    "max-entropy-shift": "max_entropy_shift",
}


@pytest.fixture(scope="module")
def rendered():
    return {name: render(name) for name in OVERLAYS}


def one(rendered, overlay: str, kind: str, name: str = "torchserve") -> dict:
    (found,) = [
        o for o in rendered[overlay].objects if o["kind"] == kind and o["metadata"]["name"] == name
    ]
    return found


def templates(rendered, overlay: str) -> dict[str, dict]:
    return {
        o["metadata"]["name"]: o
        for o in rendered[overlay].objects
        if o["kind"] == "AnalysisTemplate"
    }


def steps(rendered, overlay: str) -> list[dict]:
    return one(rendered, overlay, "Rollout")["spec"]["strategy"]["canary"]["steps"]


def args_of(step: dict) -> dict[str, dict]:
    return {a["name"]: a for a in step["analysis"]["args"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rollout_overlays_pass_argo_rollouts_crd_schemas_and_kubernetes_strict(rendered, overlay):
    custom = [o for o in rendered[overlay].objects if argo_rollouts.is_argo(o)]
    assert sorted(o["kind"] for o in custom) == ["AnalysisTemplate", "AnalysisTemplate", "Rollout"]
    for obj in custom:
        assert argo_rollouts.errors(obj) == [], obj["metadata"]["name"]
    assert schema_errors(rendered[overlay], ("1.37.0",)) == []


def test_a_broken_rollout_or_template_fails_validation_naming_the_field(rendered):
    rollout = one(rendered, "rollout", "Rollout")

    def with_step(step: dict) -> dict:
        broken = copy.deepcopy(rollout)
        broken["spec"]["strategy"]["canary"]["steps"][0] = step
        return broken

    (typo,) = argo_rollouts.errors(with_step({"setWieght": 5}))
    assert typo.startswith("spec.strategy.canary.steps[0]") and "setWieght" in typo
    (as_string,) = argo_rollouts.errors(with_step({"setWeight": "5"}))
    assert as_string.startswith("spec.strategy.canary.steps[0].setWeight:")
    assert "integer" in as_string
    # make k8s (deploy/k8s_check.py) reports it, named, among the overlay's schema errors.
    objects = [
        with_step({"setWeight": "5"}) if o["kind"] == "Rollout" else o
        for o in rendered["rollout"].objects
    ]
    (reported,) = schema_errors(Rendered("rollout", yaml.safe_dump_all(objects)), ("1.37.0",))
    assert reported.startswith("rollout: Rollout/torchserve (argoproj.io/v1alpha1 Rollout (Argo")
    assert "spec.strategy.canary.steps[0].setWeight:" in reported
    (pause,) = argo_rollouts.errors(with_step({"pause": {"duration": "5m", "until": "later"}}))
    assert pause.startswith("spec.strategy.canary.steps[0].pause") and "until" in pause
    # int-or-string fields take either, and nothing else.
    assert argo_rollouts.errors(with_step({"pause": {"duration": 300}})) == []
    (bad_duration,) = argo_rollouts.errors(with_step({"pause": {"duration": 1.5}}))
    assert bad_duration.startswith("spec.strategy.canary.steps[0].pause.duration:")

    template = copy.deepcopy(templates(rendered, "rollout")["torchserve-canary"])
    template["spec"]["metrics"][0]["successCondtion"] = "result[0] < 1"
    del template["spec"]["metrics"][1]["name"]
    found = argo_rollouts.errors(template)
    assert any(e.startswith("spec.metrics[0]") and "successCondtion" in e for e in found)
    assert any(e.startswith("spec.metrics[1]") and "'name' is a required" in e for e in found)
    # Where the CRD keeps unknown fields (a metric's plugin config), the check keeps them too.
    schema = argo_rollouts.schema("argoproj.io/v1alpha1", "Rollout")
    assert "additionalProperties" not in str(
        argo_rollouts.strict({"x-kubernetes-preserve-unknown-fields": True, "properties": {}})
    )
    assert schema["properties"]["spec"]["additionalProperties"] is False


def test_the_vendored_crds_are_the_pinned_release_files():
    source = (argo_rollouts.CRDS / "SOURCE.md").read_text()
    assert f"Tag: {argo_rollouts.VERSION}" in source
    for name, sha256 in argo_rollouts.FILES.values():
        assert f"| {name} | {sha256} |" in source
        crd = yaml.safe_load((argo_rollouts.CRDS / name).read_text())
        assert crd["spec"]["group"] == "argoproj.io"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rollout_takes_over_the_deployment_and_steps_analyse_every_model(rendered, overlay):
    rollout = one(rendered, overlay, "Rollout")
    deployment = one(rendered, overlay, "Deployment")
    ref = rollout["spec"]["workloadRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", "torchserve")
    assert "template" not in rollout["spec"], "one pod template: the Deployment's"
    assert "replicas" not in deployment["spec"], "the Rollout owns the replica count"
    assert rollout["spec"]["selector"] == deployment["spec"]["selector"]
    target = one(rendered, overlay, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Rollout", "torchserve")

    canary = rollout["spec"]["strategy"]["canary"]
    services = {
        o["metadata"]["name"]: o for o in rendered[overlay].objects if o["kind"] == "Service"
    }
    for role in ("stableService", "canaryService"):
        service = services[canary[role]]
        assert service["spec"]["selector"] == services["torchserve"]["spec"]["selector"]
        assert service["spec"]["ports"] == services["torchserve"]["spec"]["ports"]

    # setWeight, a pause to gather traffic, then one analysis per registered model, for each weight.
    models = registry.names()
    weights, i, all_steps = [], 0, steps(rendered, overlay)
    while i < len(all_steps):
        weights.append(all_steps[i]["setWeight"])
        assert "duration" in all_steps[i + 1]["pause"]
        analysed = [args_of(s)["model"]["value"] for s in all_steps[i + 2 : i + 2 + len(models)]]
        assert sorted(analysed) == sorted(models)
        i += 2 + len(models)
    assert weights == WEIGHTS


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_step_supplies_each_template_arg_and_tells_versions_apart(rendered, overlay):
    found = templates(rendered, overlay)
    for step in steps(rendered, overlay):
        if "analysis" not in step:
            continue
        given = args_of(step)
        assert given["stable-hash"]["valueFrom"] == {"podTemplateHashValue": "Stable"}
        assert given["canary-hash"]["valueFrom"] == {"podTemplateHashValue": "Latest"}
        for ref in step["analysis"]["templates"]:
            template = found[ref["templateName"]]
            needed = {a["name"] for a in template["spec"]["args"] if "value" not in a}
            assert needed <= given.keys(), (ref["templateName"], needed - given.keys())
            used = set(re.findall(r"\{\{args\.([\w-]+)\}\}", yaml.safe_dump(template["spec"])))
            assert used <= {a["name"] for a in template["spec"]["args"]}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_prometheus_queries_compare_canary_and_stable_on_metrics_the_pods_export(rendered, overlay):
    declared = (ROOT / "metrics.yaml").read_text()
    for template in templates(rendered, overlay).values():
        for metric in template["spec"]["metrics"]:
            query = metric["provider"].get("prometheus", {}).get("query")
            if query is None:
                continue
            assert f'{HASH}="{{{{args.canary-hash}}}}"' in query, metric["name"]
            assert f'{HASH}="{{{{args.stable-hash}}}}"' in query, metric["name"]
            names = set(
                re.findall(r"\b(ts_handler_\w+?|Requests\dXX)(?:_bucket|_sum|_count)?\{", query)
            )
            assert names, metric["name"]
            for name in names:
                assert f"name: {name}" in declared, f"{metric['name']}: {name} is not exported"
            assert "isNaN(result[0])" in metric["successCondition"], "no traffic must not pass"
    names = {m["name"] for t in templates(rendered, overlay).values() for m in t["spec"]["metrics"]}
    expected = {"p99-ratio", "answers", "entropy-shift"}
    # The OIP server has no per-status answer counts: the judge compares errors there.
    assert names == (expected | {"error-rate-increase"} if overlay == "rollout" else expected)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_answers_metric_runs_the_judge_from_the_serving_image_against_both_services(
    rendered, overlay
):
    deployment = one(rendered, overlay, "Deployment")
    (serving,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "torchserve"
    ]
    canary = one(rendered, overlay, "Rollout")["spec"]["strategy"]["canary"]
    (answers,) = [
        m
        for m in templates(rendered, overlay)["torchserve-canary"]["spec"]["metrics"]
        if m["name"] == "answers"
    ]
    job = answers["provider"]["job"]["spec"]
    assert job["backoffLimit"] == 0 and answers["failureLimit"] == 0
    pod = job["template"]["spec"]
    (judge,) = pod["containers"]
    assert judge["image"] == serving["image"]
    argv = judge["command"] + judge["args"]
    assert argv[:5] == ["python", "-m", "deploy.rollout", "judge", "{{args.model}}"]
    assert argv[argv.index("--stable") + 1] == f"http://{canary['stableService']}:8080"
    assert argv[argv.index("--candidate") + 1] == f"http://{canary['canaryService']}:8080"
    # The judge speaks what the pods serve (their RUNTIME): TorchServe's REST, or the Open
    # Inference Protocol's /v2 (rollout-oip), where TorchServe's /predictions is not served.
    served = {e["name"]: e.get("value") for e in serving.get("env", [])}.get("RUNTIME")
    assert served == ("oip" if overlay == "rollout-oip" else None), served
    spoken = argv[argv.index("--runtime") + 1] if "--runtime" in argv else "torchserve"
    assert spoken == (served or "torchserve"), argv
    assert spoken in RUNTIMES
    token = argv[argv.index("--token-file") + 1]
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [m for m in judge["volumeMounts"] if token.startswith(m["mountPath"] + "/")]
    assert volumes[mount["name"]]["secret"]["secretName"] == "torchserve-client-tokens"
    # The image has no tools or data to draw held-out requests: they come from a ConfigMap.
    bodies = argv[argv.index("--bodies") + 1]
    assert bodies.endswith("/{{args.model}}.jsonl")
    (mount,) = [m for m in judge["volumeMounts"] if bodies.startswith(m["mountPath"] + "/")]
    assert volumes[mount["name"]]["configMap"]["name"] == "rollout-judge-bodies"
    # The namespace enforces the restricted Pod Security profile on the judge's pod too.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert judge["securityContext"]["allowPrivilegeEscalation"] is False
    assert judge["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"cpu", "memory"} <= judge["resources"]["limits"].keys()
    assert judge["securityContext"]["capabilities"]["drop"] == ["ALL"]


def test_oip_rollout_serves_the_protocol_and_classifiers_get_the_entropy_check(rendered):
    pod = one(rendered, "rollout-oip", "Deployment")["spec"]["template"]["spec"]
    for c in pod["containers"]:
        assert {"name": "RUNTIME", "value": "oip"} in c["env"], c["name"]
    for overlay in OVERLAYS:
        for step in steps(rendered, overlay):
            if "analysis" in step:
                model = args_of(step)["model"]["value"]
                names = {t["templateName"] for t in step["analysis"]["templates"]}
                entropy = "torchserve-canary-entropy" in names
                # Classifiers (text, image, tabular kits) report each answer's entropy; frequency
                # (the signal kit) extracts components and reports their std only.
                assert entropy == ("signal" not in registry.get(model).kits), model


def test_step_thresholds_are_the_models_rollout_yaml(rendered):
    """handlers/<model>/rollout.yaml holds each model's thresholds; the Prometheus metrics use the
    same numbers."""
    for step in steps(rendered, "rollout"):
        if "analysis" not in step:
            continue
        given = args_of(step)
        path = ROOT / "handlers" / given["model"]["value"] / "rollout.yaml"
        if not path.exists():
            continue
        data = yaml.safe_load(path.read_text())
        for arg, key in THRESHOLD_KEYS.items():
            if arg in given:
                assert float(given[arg]["value"]) == float(data[key]), (path, key)


def test_docs_say_how_to_install_watch_promote_and_abort():
    doc = (ROOT / "docs/kubernetes.md").read_text()
    section = doc.split("## Canary rollouts with Argo Rollouts", 1)[1].split("\n## ", 1)[0]
    assert f"argo-rollouts/releases/download/{argo_rollouts.VERSION}/install.yaml" in section
    for command in (
        "kubectl apply -k k8s/overlays/rollout",
        "kubectl argo rollouts get rollout torchserve -n torchserve --watch",
        "kubectl argo rollouts promote torchserve -n torchserve",
        "kubectl argo rollouts abort torchserve -n torchserve",
        "handlers/<model>/rollout.yaml",
        HASH,
    ):
        assert command in section, command


def _mirror_upstreams(config: str) -> dict[str, str]:
    return dict(re.findall(r"upstream (\w+) \{ server ([^;]+);", config))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_clients_rest_is_mirrored_at_each_pods_door_and_the_judge_reads_the_copies(
    rendered, overlay
):
    """An nginx container in front of the door (deploy/mirror.py's config, from the serving
    image) takes the clients' REST, and the judge's through the stable and canary Services, which
    it does not copy; the copies go to the rollout-recorder, which the judge reads with --copies,
    needing at least --min-copies of them."""
    objects = rendered[overlay].objects
    spec = one(rendered, overlay, "Deployment")["spec"]["template"]["spec"]
    by_name = {c["name"]: c for c in spec["containers"]}
    mirror, serving, proxy = by_name["mirror"], by_name["torchserve"], by_name["proxy"]
    assert mirror["image"] == serving["image"]
    assert mirror["command"][0] == "nginx"
    conf_path = mirror["command"][mirror["command"].index("-c") + 1]
    volumes = {v["name"]: v for v in spec["volumes"]}
    (mount,) = [m for m in mirror["volumeMounts"] if conf_path.startswith(m["mountPath"] + "/")]
    configmap = volumes[mount["name"]]["configMap"]["name"]
    (cm,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == configmap]
    config = cm["data"][conf_path.rsplit("/", 1)[1]]
    assert config == mirror_k8s_config()
    ports = {p["name"]: p["containerPort"] for c in spec["containers"] for p in c.get("ports", [])}
    assert f"listen {ports['mirror']};" in config
    upstreams = _mirror_upstreams(config)
    assert upstreams["door"] == f"127.0.0.1:{ports['http']}"  # the door, on loopback
    # Hardened like the pod's other containers; no client token: the door checks them.
    sc = mirror["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["runAsNonRoot"] is True and sc["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= mirror["resources"]["limits"].keys()
    assert {"readinessProbe", "livenessProbe"} <= mirror.keys()
    assert not any("secret" in volumes[m["name"]] for m in mirror["volumeMounts"])
    writable = [m["mountPath"] for m in mirror["volumeMounts"] if "emptyDir" in volumes[m["name"]]]
    assert writable and all(f"{w}/nginx.pid" in config or w in config for w in writable)
    assert "proxy_connect_timeout 200ms;" in config and "proxy_read_timeout 1s;" in config
    # Clients' REST through the mirror, gRPC straight to the door; the judge's requests go the
    # clients' way, marked so that the mirror does not copy them (test_mirror.py runs it).
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    targets = {
        name: {p["name"]: p["targetPort"] for p in s["spec"]["ports"]}
        for name, s in services.items()
    }
    assert targets["torchserve"] == {"http": "mirror", "grpc": "grpc"}
    canary = one(rendered, overlay, "Rollout")["spec"]["strategy"]["canary"]
    for name in (canary["stableService"], canary["canaryService"]):
        assert targets[name] == {"http": "mirror", "grpc": "grpc"}, name
    assert f"if ($http_{MIRROR_JUDGE_HEADER.lower().replace('-', '_')}) {{ return 204; }}" in config
    (policy,) = [
        o for o in objects if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "torchserve"
    ]
    assert {p["port"] for r in policy["spec"]["ingress"] for p in r["ports"]} == {
        "http",
        "grpc",
        "metrics",
        "mirror",
    }
    # The recorder: the serving image's `python -m deploy.mirror record`, behind its Service.
    recorder = one(rendered, overlay, "Deployment", "rollout-recorder")
    rpod = recorder["spec"]["template"]
    (rc,) = rpod["spec"]["containers"]
    assert rc["image"] == serving["image"]
    argv = rc["command"] + rc["args"]
    assert argv[:4] == ["python", "-m", "deploy.mirror", "record"]
    assert int(argv[argv.index("--port") + 1]) == MIRROR_PORT == rc["ports"][0]["containerPort"]
    rsvc = services["rollout-recorder"]
    assert rsvc["spec"]["selector"].items() <= rpod["metadata"]["labels"].items()
    (port,) = rsvc["spec"]["ports"]
    assert port["targetPort"] == rc["ports"][0]["name"]
    assert upstreams["recorder"] == f"rollout-recorder:{port['port']}"
    assert rpod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert rpod["spec"]["automountServiceAccountToken"] is False
    assert rc["securityContext"]["readOnlyRootFilesystem"] is True
    assert rc["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= rc["resources"]["limits"].keys()
    # It keeps copies only of requests with a client token: the door's, from the same Secret.
    tokens = argv[argv.index("--token-file") + 1]
    rvolumes = {v["name"]: v for v in rpod["spec"]["volumes"]}
    (tmount,) = [m for m in rc["volumeMounts"] if tokens.startswith(m["mountPath"] + "/")]
    assert rvolumes[tmount["name"]]["secret"]["secretName"] == "torchserve-client-tokens"
    assert {e["name"]: e.get("value") for e in proxy["env"]}["PROXY_TOKENS"] == tokens
    # The judge reads the copies, and needs some: held-out bodies do not stand in for them.
    (answers,) = [
        m
        for m in templates(rendered, overlay)["torchserve-canary"]["spec"]["metrics"]
        if m["name"] == "answers"
    ]
    job_pod = answers["provider"]["job"]["spec"]["template"]
    (judge,) = job_pod["spec"]["containers"]
    jargv = judge["args"]
    assert jargv[jargv.index("--copies") + 1] == f"http://rollout-recorder:{port['port']}"
    assert int(jargv[jargv.index("--min-copies") + 1]) >= 20
    # Only the serving pods (copies in) and the judge (copies out) reach the recorder.
    (rpolicy,) = [
        o
        for o in objects
        if o["kind"] == "NetworkPolicy" and o["metadata"]["name"] == "rollout-recorder"
    ]
    assert (
        rpolicy["spec"]["podSelector"]["matchLabels"].items() <= rpod["metadata"]["labels"].items()
    )
    (rule,) = rpolicy["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [port["targetPort"]]
    sources = [f["podSelector"]["matchLabels"] for f in rule["from"]]
    assert len(sources) == 2 and all(len(f) == 1 for f in rule["from"])
    serving_labels = one(rendered, overlay, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert any(s.items() <= serving_labels.items() for s in sources)
    assert any(s.items() <= job_pod["metadata"]["labels"].items() for s in sources)
    assert not any(s.items() <= rpod["metadata"]["labels"].items() for s in sources)
    assert proxy["name"] == "proxy"


@pytest.mark.parametrize("overlay", ["cpu", "oip"])
def test_overlays_without_the_rollout_have_no_mirror_or_recorder(overlay):
    objects = render(overlay).objects
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    names = [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert "mirror" not in names
    (service,) = [
        o for o in objects if o["kind"] == "Service" and o["metadata"]["name"] == "torchserve"
    ]
    assert {p["targetPort"] for p in service["spec"]["ports"]} == {"http", "grpc"}
    assert not [o for o in objects if "recorder" in o["metadata"]["name"]]


def test_the_serving_image_carries_nginx_and_the_recorder():
    dockerfile = (ROOT / "docker/Dockerfile.cpu").read_text()
    (install,) = re.findall(r"apt-get install -y --no-install-recommends ([^\\]+)", dockerfile)
    assert "nginx" in install.split()
    assert "COPY --chown=root:root deploy/ /opt/torchserve/app/deploy/" in dockerfile


def test_docs_say_how_the_mirror_works_what_it_costs_and_how_to_see_it():
    doc = (ROOT / "docs/kubernetes.md").read_text()
    section = doc.split("## Canary rollouts with Argo Rollouts", 1)[1].split("\n## ", 1)[0]
    for words in (
        "### Live traffic, mirrored at the door",
        "k8s/components/rollout/nginx.conf",
        "python -m deploy.mirror record",
        "--copies http://rollout-recorder:8097",
        "--min-copies 20",
        MIRROR_JUDGE_HEADER,
        "gRPC is not mirrored",
        "What it costs",
        "curl -s localhost:8097/healthz",
        "mirrored_requests",
    ):
        assert words in section, words
