"""`make rollout` for real (rehearsal/rollout.py): the stable and a candidate tiny tabular archive,
each served the pod's way, behind the rehearsal's HAProxy balancer under Locust load. A good
candidate (the same archive) passes the shadow and every canary step and is reported promoted; on
the same replicas, the same candidate whose server is killed mid-canary (at 100 %: the stable
replica has weight 0) costs no client request and is rolled back, the reason naming it down; a bad
one (its classes named in reverse order: every label flips) is rolled back at the shadow step, the
reason naming label agreement. None costs a client request, and the bad one never answers a
client. Short steps and few requests keep it to seconds past the replicas' start."""

from __future__ import annotations

import json
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import pytest
import requests

from handlers.kits.signal.codec import STATE_HEADER
from rehearsal import rollout
from rehearsal.balancer import Balancer
from rehearsal.pod import Pod
from tests.support.candidates import labels_swapped, version_bumped
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal

pytestmark = [pytest.mark.integration, pytest.mark.serial]

SHORT = ["--steps", "5,100", "--step-s", "2", "--judge-requests", "20", "--users", "2"]


def _rollout(tmp: Path, stable: Path, candidate: Path) -> tuple[int, dict]:
    code = rollout.main(
        ["tabular", "--stable", str(stable), "--candidate", str(candidate), *SHORT]
        + ["--out", str(tmp / "reports"), "--work", str(tmp / "work")]
    )
    return code, json.loads((tmp / "reports" / "rollout-tabular.json").read_text())


def _run(
    tmp: Path,
    mar: Path,
    pods: dict[str, Pod],
    steps: list[int],
    step_s: float,
    kill: dict | None = None,
) -> dict:
    """A rollout on replicas already started (left running), as main() runs one."""
    r: rollout.Rollout

    def say(line: str) -> None:
        print(line)
        if kill is not None and line.startswith("rollout: canary"):
            threading.Thread(target=_kill_when_in_flight, args=(r, 1.0, kill)).start()

    tmp.mkdir(parents=True)
    r = rollout.Rollout(
        "tabular", mar, mar, tmp, steps=steps, step_s=step_s, judge_requests=20, users=2,
        say=say, pods=pods,
    )  # fmt: skip
    return r.run()


def _clients(tmp: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp / "requests.jsonl").read_text().splitlines() if x]


def _the_good_one(good: dict) -> None:
    assert [s["step"] for s in good["steps"]] == ["shadow", "canary 5%", "canary 100%"]
    assert all(s["passed"] for s in good["steps"]), good["steps"]
    assert good["steps"][0]["metrics"]["label_agreement"] == 1.0
    # Judged on the clients' own requests, mirrored by nginx at every step (20 paired a step).
    assert all(0 < s["metrics"]["mirrored_requests"] <= 20 for s in good["steps"]), good["steps"]
    assert good["clients"]["failed"] == 0, good["clients"]
    assert good["clients"]["answered_by"]["b"] > 0  # the candidate really took client traffic
    assert "python -m deploy promote tabular" in good["promotion"]["command"]


def _chunk(base: str, chunk: np.ndarray, state: str | None, binary: bool) -> requests.Response:
    """One chunk of a frequency stream (extracting 1 and 3 Hz), JSON or float32."""
    url, auth = f"{base}/predictions/frequency", {"Authorization": f"Bearer {rollout.TOKEN}"}
    if binary:
        raw = "application/octet-stream"
        headers = auth | {"Content-Type": raw, "Accept": raw}
        headers |= {STATE_HEADER: state} if state else {"X-Stream": "start", "X-Frequencies": "1,3"}
        return requests.post(url, data=chunk.astype("<f4").tobytes(), headers=headers, timeout=30)
    body = {"signal": chunk.tolist()} | (
        {"state": state} if state else {"stream": True, "frequencies": [1, 3]}
    )
    return requests.post(url, json=body, headers=auth, timeout=30)


def _components(resp: requests.Response) -> np.ndarray:
    assert resp.status_code == 200, resp.text
    if resp.headers["Content-Type"].startswith("application/octet-stream"):
        shape = tuple(int(d) for d in resp.headers["X-Shape"].split(","))
        return np.frombuffer(resp.content, "<f4").reshape(shape)[0]
    return np.array([c["signal"] for c in resp.json()["components"]])


def _streams_across_the_switch(pods: dict[str, Pod], work: Path) -> None:
    """Frequency streams through the rollout's balancer while the weights move: started at 50/50
    (so on both versions), continued after the switch to the candidate (stable's weight 0) and
    after the switch back (candidate's weight 0). Every chunk stays on the version that started
    its stream and the stream equals the signal sent whole; the other version refuses a state it
    did not make with 409 stale_state."""
    signal = make_signal(CONFIGS["tiny"].signal, seed=11).mixed
    whole = _components(_chunk(pods["a"].http, signal, None, binary=False))
    chunks = np.array_split(signal, [1, 300, 700, 1100, 1500])
    lb = Balancer(work, pods, rollout.TOKEN, rollout=True).start()
    try:
        lb.set_weight("a", 50)
        lb.set_weight("b", 50)
        streams = [{"binary": n % 2 == 1, "state": None, "out": [], "by": []} for n in range(8)]
        for k, chunk in enumerate(chunks):
            if k == 2:  # the canary's 100 % step
                lb.set_weight("a", 0)
                lb.set_weight("b", 100)
            if k == 4:  # rolled back
                lb.set_weight("a", 100)
                lb.set_weight("b", 0)
            for s in streams:
                resp = _chunk(lb.http, chunk, s["state"], s["binary"])
                s["by"].append(resp.headers.get("X-Replica"))
                assert resp.status_code == 200, (s["by"], resp.text)
                s["out"].append(_components(resp))
                s["state"] = resp.headers[STATE_HEADER]
    finally:
        lb.stop()
    assert {s["by"][0] for s in streams} == {"a", "b"}  # streams started on both versions
    for s in streams:
        assert len(set(s["by"])) == 1, s["by"]  # each stayed on its version
        assert float(np.abs(np.concatenate(s["out"], axis=1) - whole).max()) <= 1e-5
    on_b = next(s for s in streams if s["by"][0] == "b")
    refused = _chunk(pods["a"].http, chunks[0], on_b["state"], on_b["binary"])
    assert refused.status_code == 409 and refused.json()["kind"] == "stale_state", refused.text


def _kill_when_in_flight(r: rollout.Rollout, after_s: float, out: dict) -> None:
    """SIGKILL the candidate's replica (TorchServe and its pod proxy: a node lost) `after_s` into
    the step, at a moment the door has a client request open on it if one comes within 2 s."""
    time.sleep(after_s)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and not r.lb.in_flight(rollout.CANDIDATE):
        time.sleep(0.005)
    out["in_flight"] = r.lb.in_flight(rollout.CANDIDATE)
    assert r.pods is not None
    out["killed_at"] = time.time()  # before the SIGKILL: kill() returns once all are reaped
    r.pods[rollout.CANDIDATE].kill()


def test_a_good_candidate_is_promoted_a_crashing_or_bad_one_rolled_back(
    tabular_archive: Path,
    frequency_archive: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MODEL_BUCKET", raising=False)  # no bucket: promotion is reported only

    # Both replicas also serve frequency, the candidate's under another version (the same model):
    # a stream crosses from one version to the other when the traffic moves.
    frequency_b = version_bumped(frequency_archive, tmp_path / "candidate" / "frequency.mar")
    pods = rollout.replicas(
        {"tabular": tabular_archive, "frequency": frequency_archive},
        {"tabular": tabular_archive, "frequency": frequency_b},
        tmp_path / "pods",
    )
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(Pod.start, pods.values()))
        good = _run(tmp_path / "good", tabular_archive, pods, steps=[5, 100], step_s=2)
        assert good["outcome"] == "promoted", good
        _the_good_one(good)
        _streams_across_the_switch(pods, tmp_path / "streams")

        # The same candidate again, its replica killed 1 s into the 100 % step.
        killed: dict = {}
        crash = _run(tmp_path / "crash", tabular_archive, pods, steps=[100], step_s=4, kill=killed)
    finally:
        for pod in pods.values():
            pod.kill()
    assert crash["outcome"] == "rolled back", crash
    print(f"killed with {killed['in_flight']} client request(s) open on the candidate")
    assert crash["reason"].startswith("canary 100%: candidate_down: "), crash["reason"]
    assert [s["step"] for s in crash["steps"]] == ["shadow", "canary 100%"]
    assert crash["clients"]["failed"] == 0, crash["clients"]
    late = [e for e in _clients(tmp_path / "crash") if e["start"] > killed["killed_at"]]
    assert late and all(e["ok"] and e["replica"] in ("a", "standby") for e in late), late[:5]
    assert crash["promotion"]["done"] is False

    bad = labels_swapped(tabular_archive, tmp_path / "bad" / "tabular-bad.mar")
    code, rolled = _rollout(tmp_path / "bad", tabular_archive, bad)
    assert (code, rolled["outcome"]) == (1, "rolled back"), rolled
    assert [s["step"] for s in rolled["steps"]] == ["shadow"]
    assert rolled["reason"].startswith("shadow: label_agreement "), rolled["reason"]
    assert rolled["steps"][0]["metrics"]["label_agreement"] < 0.97
    assert rolled["clients"]["failed"] == 0, rolled["clients"]
    assert rolled["clients"]["requests"] > 0
    assert rolled["clients"]["answered_by"]["b"] == 0  # clients never got the bad answers
    assert rolled["promotion"]["done"] is False


def _stall(r: rollout.Rollout, after_s: float, out: dict) -> None:
    """SIGSTOP the candidate's model workers `after_s` into the step: TorchServe's frontend and
    the pod proxy keep running, so its /ping still answers and every request it takes waits."""
    time.sleep(after_s)
    assert r.pods is not None
    ts = psutil.Process(r.pods[rollout.CANDIDATE].procs["torchserve"].pid)
    workers = [
        w for w in ts.children(recursive=True) if "model_service_worker" in " ".join(w.cmdline())
    ]
    for w in workers:
        w.send_signal(signal.SIGSTOP)
    out["workers"], out["stalled_at"] = workers, time.time()


def test_a_candidate_that_stalls_mid_canary_costs_no_client_request(
    tabular_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate's workers stall (SIGSTOP) one second into the 100 % step, under REST and
    gRPC load: every request it then holds is retried after the try timeout (3 s) on the standby
    (the stable replica), the rollout takes the candidate out at the first retry and rolls it
    back, the reason naming the stall. No client request fails, and every one sent after the
    stall is answered by the stable version."""
    monkeypatch.delenv("MODEL_BUCKET", raising=False)
    tabular = {"tabular": tabular_archive}
    pods = rollout.replicas(tabular, tabular, tmp_path / "pods")
    stalled: dict = {}
    r: rollout.Rollout

    def say(line: str) -> None:
        print(line)
        if line.startswith("rollout: canary"):
            threading.Thread(target=_stall, args=(r, 1.0, stalled)).start()

    (tmp_path / "stall").mkdir()
    r = rollout.Rollout(
        "tabular", tabular_archive, tabular_archive, tmp_path / "stall", steps=[100], step_s=8,
        judge_requests=20, users=2, try_timeout_s=3, say=say, pods=pods,
    )  # fmt: skip
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(Pod.start, pods.values()))
        result = r.run()
    finally:
        for w in stalled.get("workers", []):
            w.send_signal(signal.SIGCONT)
        for pod in pods.values():
            pod.kill()
    assert stalled["workers"], "no model worker found to stall"
    assert result["outcome"] == "rolled back", result
    assert [s["step"] for s in result["steps"]] == ["shadow", "canary 100%"]
    assert result["reason"].startswith("canary 100%: candidate_down: "), result["reason"]
    assert "it stalls" in result["reason"], result["reason"]
    assert result["steps"][-1]["door"]["candidate"]["wretr"] >= 1  # it did hold requests
    assert result["clients"]["failed"] == 0, result["clients"]
    late = [e for e in _clients(tmp_path / "stall") if e["start"] > stalled["stalled_at"]]
    assert late and all(e["ok"] and e["replica"] in ("a", "standby") for e in late), late[:5]
    assert result["promotion"]["done"] is False


def test_over_the_oip_runtime_a_good_candidate_is_promoted_a_bad_one_rolled_back(
    tabular_archive: Path,
    frequency_archive: Path,
    sentiment_archive: Path,
    digits_archive: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make rollout RUNTIME=oip`: the replica sets serve the Open Inference Protocol (the pods'
    RUNTIME=oip), health-checked at its readiness route; the judge and the Locust users speak its
    /v2 REST. The good candidate is promoted, the bad one (every label flipped) rolled back at the
    shadow step; neither costs a client request. Frequency too, on the same replicas: its signal
    sent as tensors and its answers read back into components, a candidate under another version
    is promoted with the components equal. Sentiment (texts as BYTES) and digits (images as
    binary data) likewise, each candidate under another version, promoted with every label
    agreeing. Three pods (stable, good, bad), one start."""
    monkeypatch.delenv("MODEL_BUCKET", raising=False)
    bad_mar = labels_swapped(tabular_archive, tmp_path / "candidate" / "tabular-bad.mar")
    stables = {
        "tabular": tabular_archive,
        "frequency": frequency_archive,
        "sentiment": sentiment_archive,
        "digits": digits_archive,
    }
    bumped = {
        m: version_bumped(mar, tmp_path / "candidate" / f"{m}.mar")
        for m, mar in stables.items()
        if m != "tabular"
    }
    pods = rollout.replicas(
        stables, {"tabular": tabular_archive, **bumped}, tmp_path / "pods", runtime="oip"
    )
    a = pods[rollout.STABLE]
    bad_pod = Pod(
        tmp_path / "pods" / "bad", {"tabular": bad_mar}, [rollout.TOKEN], a.config,
        state_key=a.state_key, runtime="oip",
    )  # fmt: skip

    def run(name: str, candidate: Path, b: Pod, steps: list[int], model: str = "tabular") -> dict:
        (tmp_path / name).mkdir()
        return rollout.Rollout(
            model, stables[model], candidate, tmp_path / name, steps=steps, step_s=2,
            judge_requests=20, users=2, pods={rollout.STABLE: a, rollout.CANDIDATE: b},
            runtime="oip",
        ).run()  # fmt: skip

    try:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(Pod.start, [*pods.values(), bad_pod]))
        auth = {"Authorization": f"Bearer {rollout.TOKEN}"}
        for pod in (a, bad_pod):  # the OIP server behind each door, not TorchServe
            assert requests.get(f"{pod.http}/v2/models/tabular", headers=auth, timeout=30).ok
            assert requests.get(f"{pod.http}/ping", headers=auth, timeout=30).status_code == 404
        good = run("good", tabular_archive, pods[rollout.CANDIDATE], [5, 100])
        bad = run("bad", bad_mar, bad_pod, [5, 100])
        freq = run("frequency", bumped["frequency"], pods[rollout.CANDIDATE], [100], "frequency")
        classifiers = {
            m: run(m, bumped[m], pods[rollout.CANDIDATE], [100], m) for m in ("sentiment", "digits")
        }
    finally:
        for pod in (*pods.values(), bad_pod):
            pod.kill()
    assert good["outcome"] == "promoted", good
    _the_good_one(good)
    infer = [e for e in _clients(tmp_path / "good") if e["type"] == "POST"]
    assert infer and len(infer) == good["clients"]["requests"]  # REST only: OIP has no TS gRPC

    assert bad["outcome"] == "rolled back", bad
    assert [s["step"] for s in bad["steps"]] == ["shadow"]
    assert bad["reason"].startswith("shadow: label_agreement "), bad["reason"]
    assert bad["steps"][0]["metrics"]["label_agreement"] < 0.97
    assert bad["clients"]["failed"] == 0 and bad["clients"]["requests"] > 0, bad["clients"]
    assert bad["clients"]["answered_by"]["b"] == 0  # clients never got the bad answers
    assert bad["promotion"]["done"] is False

    assert freq["outcome"] == "promoted", freq
    assert [s["step"] for s in freq["steps"]] == ["shadow", "canary 100%"]
    for step in freq["steps"]:  # every paired answer's components compared, all equal
        assert step["metrics"]["compared"] >= 20, step["metrics"]
        assert step["metrics"]["component_mad"] < 1e-6, step["metrics"]
    assert freq["clients"]["failed"] == 0 and freq["clients"]["answered_by"]["b"] > 0

    for model, result in classifiers.items():  # their own tensors both ways, every label agreeing
        assert result["outcome"] == "promoted", (model, result)
        assert [s["step"] for s in result["steps"]] == ["shadow", "canary 100%"], model
        for step in result["steps"]:
            assert step["metrics"]["compared"] >= 20, (model, step["metrics"])
            assert step["metrics"]["label_agreement"] == 1.0, (model, step["metrics"])
        assert result["clients"]["failed"] == 0, (model, result["clients"])
        assert result["clients"]["answered_by"]["b"] > 0, model
