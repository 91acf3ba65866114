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
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rehearsal import rollout
from rehearsal.pod import Pod
from tests.support.candidates import labels_swapped

pytestmark = pytest.mark.integration

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
    assert good["clients"]["failed"] == 0, good["clients"]
    assert good["clients"]["answered_by"]["b"] > 0  # the candidate really took client traffic
    assert "python -m deploy promote tabular" in good["promotion"]["command"]


def _kill_when_in_flight(r: rollout.Rollout, after_s: float, out: dict) -> None:
    """SIGKILL the candidate's replica (TorchServe and its pod proxy: a node lost) `after_s` into
    the step, at a moment the door has a client request open on it if one comes within 2 s."""
    time.sleep(after_s)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline and not r.lb.in_flight(rollout.CANDIDATE):
        time.sleep(0.005)
    out["in_flight"] = r.lb.in_flight(rollout.CANDIDATE)
    assert r.pods is not None
    r.pods[rollout.CANDIDATE].kill()
    out["killed_at"] = time.time()


def test_a_good_candidate_is_promoted_a_crashing_or_bad_one_rolled_back(
    tabular_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MODEL_BUCKET", raising=False)  # no bucket: promotion is reported only

    pods = rollout.replicas("tabular", tabular_archive, tabular_archive, tmp_path / "pods")
    try:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(Pod.start, pods.values()))
        good = _run(tmp_path / "good", tabular_archive, pods, steps=[5, 100], step_s=2)
        assert good["outcome"] == "promoted", good
        _the_good_one(good)

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
