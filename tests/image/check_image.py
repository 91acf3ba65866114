"""The built serving image, run as the Deployment runs it (tests/image/pod.py says how, and what
differs from a kubelet's), answers every registered model as the in-process ModelService does.

`make image-test` runs this file (never `make test`'s tiers: it needs root, a built image and the
archives of `make archive`), in a network namespace of its own:

    IMAGE=torchserve-models:0.1.0-cpu IMAGE_STORE=model_store \\
        unshare --net -- .venv/bin/python -m tests.support.netns .venv/bin/python -m pytest --noconftest tests/image/check_image.py

For each runtime (TorchServe, and the `oip` overlay's RUNTIME=oip), the pod starts from the image
with the rendered overlay's containers, volumes, env and probes; every model's inputs (the same
cases the runtimes are compared on, tests/integration/test_oip_torchserve.py) go through the door
(docker/proxy.sh's HAProxy, with a client token) and the answers must equal the in-process
ModelService's over the same archive, read through the model's tensor contract (within
`ATOL`); then the pod is deleted as the kubelet deletes one: preStop, SIGTERM, and every container
must exit 0 within terminationGracePeriodSeconds, a request in flight answered. The time from
start to READY and the termination figures go to reports/image/pod-<runtime>.json.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from handlers import registry
from handlers.codec import Reply
from tests.fixtures.oip import client_calls
from tests.image.pod import ImagePod
from tests.integration.test_oip_torchserve import cases, oip_call, oip_outputs
from tests.support import wire

ROOT = Path(__file__).resolve().parents[2]
IMAGE = os.environ.get("IMAGE", "torchserve-models:0.1.0-cpu")
STORE = Path(os.environ.get("IMAGE_STORE", ROOT / "model_store"))
RUNTIMES = os.environ.get("IMAGE_RUNTIMES", "torchserve oip").split()
REPORTS = ROOT / "reports" / "image"
DOOR_HTTP, DOOR_GRPC = "127.0.0.1:8085", "127.0.0.1:7075"
"""The proxy container's ports (the Deployment's containerPorts), in the pod's network namespace."""
ATOL = 1e-5
"""The image's venv and the checkout's hold the same pinned packages; batching and the thread
split move float32 results by ~1e-7 (tests/support/predictions.py)."""
OVERLAY = {"torchserve": "cpu", "oip": "oip"}


def rendered(overlay: str) -> tuple[dict, dict[str, str]]:
    from deploy.k8s_check import render

    objects = render(overlay).objects
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (cm,) = [
        o
        for o in objects
        if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("torchserve-config")
    ]
    return deployment, cm["data"]


def archives() -> list[Path]:
    found = [STORE / f"{m}.mar" for m in registry.names()]
    missing = [p.name for p in found if not p.is_file()]
    assert not missing, f"{missing} not in {STORE}: run make archive (or set IMAGE_STORE)"
    return found


class InProcess:
    """Each model's ModelService over the same archive the pod serves, in this process."""

    def __init__(self, work: Path):
        self.work = work
        self.services: dict[str, Any] = {}

    def service(self, model: str) -> Any:
        from handlers.service import ModelService

        if model not in self.services:
            unpacked = self.work / model
            with zipfile.ZipFile(STORE / f"{model}.mar") as mar:
                mar.extractall(unpacked)
            self.services[model] = ModelService.from_dir(unpacked, name=model)
        return self.services[model]

    def answer(self, model: str, native: Any) -> Reply:
        from handlers.service import Request

        body = native.body if isinstance(native.body, bytes | str) else json.dumps(native.body)
        body = body.encode() if isinstance(body, str) else body
        (reply,) = self.service(model).handle_batch([Request(body, dict(native.headers), "local")])
        assert isinstance(reply, Reply), reply
        return reply


@pytest.fixture(scope="module")
def in_process(tmp_path_factory) -> InProcess:
    return InProcess(tmp_path_factory.mktemp("in-process"))


@pytest.fixture(scope="module", params=RUNTIMES)
def pod(request) -> Any:
    runtime = request.param
    began = time.monotonic()
    deployment, config = rendered(OVERLAY[runtime])
    root = Path(tempfile.mkdtemp(prefix=f"image-pod-{runtime}-"))
    p = ImagePod(
        image=IMAGE,
        deployment=deployment,
        configmap=config,
        archives=archives(),
        root=root,
        tokens=[secrets.token_urlsafe(24)],
        state_key=secrets.token_urlsafe(32),
    )
    p.runtime = runtime  # type: ignore[attr-defined]
    try:
        p.start()
        startup = p.spec("torchserve")["startupProbe"]
        budget = startup["periodSeconds"] * startup["failureThreshold"]
        p.ready_s = p.wait_ready(timeout=budget)  # type: ignore[attr-defined]
        print(f"\n{runtime}: every container READY {p.ready_s:.1f} s after start")  # type: ignore[attr-defined]
        yield p
    finally:
        p.close()
        shutil.rmtree(root, ignore_errors=True)  # its archives and logs: 170 MB a runtime
        # CI prints each stage's time: this runtime's part of `make image-test`, start to gone.
        print(f"\nimage-test: {runtime} took {time.monotonic() - began:.0f} s")


def door_predict(pod: ImagePod, model: str, native: Any) -> tuple[int, Reply]:
    body = native.body if isinstance(native.body, bytes | str) else json.dumps(native.body)
    request = urllib.request.Request(
        f"http://{DOOR_HTTP}/predictions/{model}",
        data=body.encode() if isinstance(body, str) else body,
        headers={**native.headers, "Authorization": f"Bearer {pod.tokens[0]}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, Reply(r.read(), r.headers.get("Content-Type", ""), dict(r.headers))
    except urllib.error.HTTPError as e:
        return e.code, Reply(e.read(), e.headers.get("Content-Type", ""), dict(e.headers))


def through_oip(pod: ImagePod, calls: list[dict]) -> list[dict]:
    return client_calls(DOOR_HTTP, DOOR_GRPC, pod.tokens[0], calls)


def same(got: np.ndarray, want: np.ndarray) -> bool:
    if got.dtype == object or want.dtype == object or got.dtype.kind in "iub":
        return got.shape == want.shape and got.tolist() == want.tolist()
    return got.shape == want.shape and bool(np.allclose(got, want, rtol=0, atol=ATOL))


@pytest.mark.parametrize("model", registry.names())
def test_every_model_answers_through_the_door_as_in_process(pod, in_process, model):
    from oip.contract import Contract

    settings = in_process.service(model).settings
    contract = Contract(model, settings)
    for case in cases(model, settings):
        native = wire.native(contract, {n: a for n, _, a in case.inputs}, case.parameters)
        want = {
            o.name: o.data for o in wire.answer(contract, in_process.answer(model, native), False)
        }
        if pod.runtime == "torchserve":
            status, reply = door_predict(pod, model, native)
            assert status == 200, (case.name, reply.body[:500])
            got_all = {o.name: o.data for o in wire.answer(contract, reply, explained=False)}
            results = {"rest": got_all}
        else:
            calls = [
                oip_call(model, case.inputs, case.parameters, t, f"{model}-{t}")
                for t in ("http", "grpc")
            ]
            results = {
                c["transport"]: oip_outputs(r)
                for c, r in zip(calls, through_oip(pod, calls), strict=True)
            }
        for transport, got in results.items():
            assert sorted(got) == sorted(want), (case.name, transport)
            for name in want:
                assert same(np.asarray(got[name]), np.asarray(want[name])), (
                    case.name,
                    transport,
                    name,
                    got[name],
                    want[name],
                )


def test_nothing_runs_as_root_and_the_root_filesystem_is_read_only(pod):
    for name, c in pod.containers.items():
        procs = c.processes()
        assert procs, name
        rooted = [p for p in procs if p[1] == 0]
        assert not rooted, f"{name}: processes as root: {rooted}"
        assert all(p[1] == 10001 for p in procs), procs
        (pid1,) = [p for p in procs if p[0] == c.pid1]
        if name == "torchserve":
            assert pid1[2].startswith("/usr/bin/tini"), pid1
        denied = c.exec(["/bin/sh", "-c", "touch /written-to-root"], timeout=30)
        assert denied.returncode != 0 and "Read-only file system" in denied.stderr, denied
        allowed = c.exec(["/bin/sh", "-c", "touch /tmp/written && rm /tmp/written"], timeout=30)
        assert allowed.returncode == 0, allowed.stderr


def test_the_liveness_probes_pass(pod):
    for name in pod.containers:
        out = pod.probe(name, "livenessProbe")
        assert out is None or out.returncode == 0, (name, out.stdout, out.stderr)


def test_deleting_the_pod_drains_and_every_container_exits_0_within_the_grace_period(pod):
    """Last: the pod is gone after it. A request sent while the preStop hooks run (the kubelet runs
    them while the endpoints drop the pod) is answered; then SIGTERM, and each container exits 0."""
    model = "tabular" if "tabular" in registry.names() else registry.names()[0]
    example = registry_example(model)
    if pod.runtime == "torchserve":
        url, body = f"http://{DOOR_HTTP}/predictions/{model}", example
    else:  # one FP64 input per feature (handlers/tabular/oip.py)
        url = f"http://{DOOR_HTTP}/v2/models/{model}/infer"
        body = {
            "inputs": [
                {"name": k, "datatype": "FP64", "shape": [1], "data": [float(v)]}
                for k, v in example.items()
            ]
        }
    answered: dict[str, Any] = {}

    def during_pre_stop() -> None:
        time.sleep(2)
        request = urllib.request.Request(
            url,
            data=json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {pod.tokens[0]}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as r:
                answered["status"] = r.status
        except urllib.error.HTTPError as e:
            answered["status"], answered["body"] = e.code, e.read()[:300].decode(errors="replace")
        except OSError as e:
            answered["error"] = repr(e)

    thread = threading.Thread(target=during_pre_stop)
    thread.start()
    began = time.monotonic()
    result = pod.terminate()
    thread.join(timeout=60)
    seconds = time.monotonic() - began
    report = {
        "image": IMAGE,
        "runtime": pod.runtime,
        "ready_s": round(pod.ready_s, 1),
        "termination": result,
        "termination_s": round(seconds, 1),
        "grace_s": pod.grace,
        "request_during_pre_stop": answered,
    }
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"pod-{pod.runtime}.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))
    assert answered.get("status") == 200, answered
    for name, r in result.items():
        assert r["status"] == 0 and not r["killed_at_grace"], (name, r, pod.tail())
    assert seconds < pod.grace


def registry_example(model: str) -> dict:
    from tools.registry import get

    return get(model).example()


# --- the rollout overlay: the mirror at each pod's door and the recorder, both from the image ---


@pytest.fixture(scope="module")
def rollout_pods() -> Any:
    """The rollout overlay's serving pod (nginx's mirror in front of the door) and its
    rollout-recorder pod, both started from the image as rendered; the serving pod finds the
    recorder by its Service's name."""
    from deploy.k8s_check import render

    objects = render("rollout").objects
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    configmaps = {o["metadata"]["name"]: o["data"] for o in objects if o["kind"] == "ConfigMap"}
    (config,) = [d for n, d in configmaps.items() if n.startswith("torchserve-config")]
    root = Path(tempfile.mkdtemp(prefix="image-rollout-"))
    tokens, key = [secrets.token_urlsafe(24)], secrets.token_urlsafe(32)
    (root / "recorder").mkdir()
    (root / "serving").mkdir()
    recorder = ImagePod(
        IMAGE, deployments["rollout-recorder"], {}, [], root / "recorder", tokens, key
    )
    serving = ImagePod(
        IMAGE, deployments["torchserve"], config, archives(), root / "serving", tokens, key,
        configmaps=configmaps, hosts=("rollout-recorder",),
    )  # fmt: skip
    try:
        recorder.start()
        recorder.wait_ready(timeout=60)
        serving.start()
        startup = serving.spec("torchserve")["startupProbe"]
        serving.wait_ready(timeout=startup["periodSeconds"] * startup["failureThreshold"])
        assert set(serving.containers) == {"torchserve", "proxy", "mirror"}
        yield serving, recorder
    finally:
        serving.close()
        recorder.close()
        shutil.rmtree(root, ignore_errors=True)


def _post(port: int, model: str, body: dict, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/predictions/{model}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _recorded(port: int, want: int) -> int:
    """The recorder's count of copies once it reaches `want` (a copy travels after its answer),
    or what it holds after 10 s."""
    deadline = time.monotonic() + 10
    while True:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            held = json.loads(r.read())["copies"]
        if held >= want or time.monotonic() > deadline:
            return held
        time.sleep(0.2)


def test_the_rollout_mirror_answers_as_the_door_and_copies_only_client_predictions(rollout_pods):
    """A client's prediction through the mirror's port is the door's answer, and the recorder
    (another pod of the image) holds a copy of it, as sent; the judge's own requests
    (X-Rollout-Judge) and a request without a client token are answered by the door and not
    copied."""
    from deploy.mirror import JUDGE_HEADER, PORT, Copy

    serving, _ = rollout_pods
    (mirror_port,) = [p["containerPort"] for p in serving.spec("mirror")["ports"]]
    model = "tabular" if "tabular" in registry.names() else registry.names()[0]
    body = registry_example(model)
    auth = {"Authorization": f"Bearer {serving.tokens[0]}"}
    door = _post(8085, model, body, auth)
    mirrored = _post(mirror_port, model, body, auth)
    assert door[0] == mirrored[0] == 200, (door, mirrored)
    assert json.loads(mirrored[1]) == json.loads(door[1])
    assert _recorded(PORT, 1) == 1, serving.tail()

    judged = _post(mirror_port, model, body, {**auth, JUDGE_HEADER: "1"})
    unknown = _post(mirror_port, model, body, {"Authorization": "Bearer not-a-client"})
    assert judged[0] == 200 and unknown[0] == 401, (judged, unknown)
    assert _recorded(PORT, 2) == 1  # neither was copied

    url = f"http://127.0.0.1:{PORT}/copies?model={model}&route=predictions&n=10"
    with urllib.request.urlopen(url, timeout=5) as r:
        copies = [Copy.from_line(line) for line in r.read().decode().splitlines() if line]
    assert [(c.path, json.loads(c.body)) for c in copies] == [(f"/predictions/{model}", body)]


def test_deleting_the_rollout_pods_every_container_exits_0_within_the_grace_period(rollout_pods):
    """Last for these pods: the mirror's preStop (endpoints drop the pod, then nginx's graceful
    quit) and the recorder's SIGTERM end every container with 0 within its pod's grace period."""
    for pod in rollout_pods:
        began = time.monotonic()
        result = pod.terminate()
        for name, r in result.items():
            assert r["status"] == 0 and not r["killed_at_grace"], (name, r, pod.tail())
        assert time.monotonic() - began < pod.grace
