"""`make rollout`: a candidate version rolled out beside the stable one on this machine, for real,
judged on its answers at every step and rolled back automatically when a step fails.

    python -m rehearsal.rollout MODEL --candidate PATH.mar [--stable model_store/MODEL.mar]
        [--steps 5,25,50,100] [--step-s 10] [--judge-requests 100] [--users 4] [--out reports]

Two replica sets started the pod's way (rehearsal/pod.py: TorchServe + the pod proxy, ready by the
pod's probes), `a` serving the stable archive and `b` the candidate, behind one HAProxy balancer
(rehearsal/balancer.py, the rehearsal's) whose runtime API (`set server <backend>/<server> weight
N` over its stats socket) moves the traffic. Locust users (rehearsal/locustfile.py: REST and gRPC)
send the model's light requests through the balancer all along; each of their requests is logged
and every failure counted. The REST users reach the balancer through nginx, whose mirror module
copies each prediction to this tool (rehearsal/mirror.py; HAProxy 2.6 has no mirroring); the
copies never change or delay a client's answer.

1. Shadow: the candidate's weight is 0, so clients only ever get the stable version's answers.
   Both versions first answer a few requests unjudged (a worker's first answers are its slowest).
   The judgement sends the newest mirrored client requests (topped up, where clients sent fewer
   than `--judge-requests`, with held-out requests: tools/<model>/samples.py `payloads`) to both
   replicas' doors, judged by deploy/rollout.py on the model's own thresholds
   (handlers/<model>/rollout.yaml).
2. Canary steps (default 5, 25, 50, 100 % of the weight): at each, after `--step-s` seconds of
   client traffic split by weight, a fresh sample of paired requests is added and the judgement
   is made again over every paired request so far (a rate such as the out-of-distribution shift,
   estimated from a hundred requests, is within a few hundredths of the truth; each step narrows
   it), plus the balancer's per-server figures for the step itself from `show stat` (requests,
   5xx answers, response errors, connection errors, mean response time) and the client failures
   in the step.

The balancer is the rollout's (balancer.cfg with LB_ROLLOUT): a prediction the candidate drops,
fails at its door or holds past the try timeout (--try-timeout-s: a stall) is retried on another
server, the candidate leaves the rotation for good at its first failed answer, its first retried
request (taken out by this tool, which watches the door through each canary step) or its second
failed health check, and the stable replica stands by as a backup server when no weighted one is
up (the 100 % step); a frequency stream's chunks stay on the version that answered the previous
one. A step in which the candidate was taken out ends at once and fails as `candidate_down`, before
any request is paired with it.

A failed step sets all weight back to the stable replica at once and the rollout stops: the
candidate is not promoted (with a bucket configured, its S3 stage is left where it was). Passing
the last step promotes: with a bucket (--bucket, else MODEL_BUCKET) the candidate, published
first where it is not yet, becomes the `production` stage (deploy.s3); without one the command
that would do it is printed. The report, each step's metrics and the verdict naming the metric,
goes to <out>/rollout-<model>.json and is printed. Exit status: 0 promoted, 1 rolled back (or a
client request failed), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy import rollout as judge
from deploy.mirror import replayable
from rehearsal.__main__ import TOKEN, start_locust
from rehearsal.balancer import BACKENDS, Balancer
from rehearsal.mirror import Mirror
from rehearsal.pod import ROOT, Pod, pod_config
from tools.registry import get

STABLE, CANDIDATE, STANDBY = "a", "b", "standby"
"""The balancer's server names (rehearsal/balancer.cfg): a serves stable, b the candidate; standby
is the stable replica again as a backup, serving when no weighted server is up."""
DOOR_COUNTERS = ("stot", "hrsp_5xx", "eresp", "econ", "wretr", "wredis", "chkdown")
CHECKS = {
    "L4CON": "connection refused (the server is gone)",
    "L4TOUT": "no connection in time (the server stalls)",
    "L7TOUT": "no health answer in time (the server stalls)",
    "L7STS": "an error status to its health check",
    "L7RSP": "an invalid answer to its health check",
    "HANA": "a client request failed on it (an error status, dropped, or timed out)",
}
"""The balancer's last-check codes (`show stat` check_status), in words, for the reason."""
WARM_UP = 16
"""Requests each version answers, unjudged, before the shadow's sample."""
WATCH_S = 0.1
"""How often a canary step looks at the door for a request retried away from the candidate."""


@dataclass
class Rollout:
    model: str
    stable_mar: Path
    candidate_mar: Path
    work: Path
    steps: list[int] = field(default_factory=lambda: [5, 25, 50, 100])
    step_s: float = 10.0
    judge_requests: int = 100
    users: int = 4
    pacing_s: float = 0.2
    bucket: str | None = None
    s3_args: list[str] = field(default_factory=list)
    try_timeout_s: float = 10.0
    """How long the door and the judge wait for one answer before it counts as timed out."""
    limits: judge.Thresholds | None = None
    say: Any = print
    pods: dict[str, Pod] | None = None
    """Replica sets already started and ready (`replicas`): used, and left running at the end."""
    runtime: str = "torchserve"
    """What both replica sets serve with (the pods' RUNTIME): torchserve, or oip (the Open
    Inference Protocol server; the judge and the clients speak its /v2 REST)."""

    def __post_init__(self) -> None:
        self.limits = self.limits or judge.thresholds(self.model)
        self.paired: tuple[list[judge.Exchange], list[judge.Exchange]] = ([], [])
        self.taken_out = False
        """Whether this step's watch took the candidate out (at a retried request)."""
        self.own_pods = self.pods is None

    # -- the parts ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.pods is None:
            self.pods = replicas(
                {self.model: self.stable_mar},
                {self.model: self.candidate_mar},
                self.work,
                self.runtime,
            )
        errors: list[BaseException] = []

        def up(pod: Pod) -> None:
            try:
                pod.start()
            except BaseException as e:  # reported below, in this thread
                errors.append(e)

        def bodies() -> None:  # the held-out data loads while the replicas start
            try:
                self.draw = judge.body_source(self.model, seed=0)
            except BaseException as e:
                errors.append(e)

        starting = self.pods.values() if self.own_pods else []
        threads = [threading.Thread(target=up, args=(p,)) for p in starting]
        threads.append(threading.Thread(target=bodies))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        self.lb = Balancer(
            self.work / "lb",
            self.pods,
            TOKEN,
            rollout=True,
            try_timeout_s=self.try_timeout_s,
            runtime=self.runtime,
        ).start()
        self.lb.set_weight(CANDIDATE, 0)
        self.lb.set_weight(STABLE, 100)
        self.mirror = Mirror(self.work / "mirror", f"127.0.0.1:{self.lb.ports['http']}").start()
        self.log = self.work / "requests.jsonl"
        self.locust = start_locust(
            self.lb,
            self.log,
            self.users,
            self.work,
            self.pacing_s,
            model=self.model,
            runtime=self.runtime,
            http=self.mirror.http,
        )

    def stop(self) -> None:
        locust = getattr(self, "locust", None)
        if locust is not None and locust.poll() is None:
            locust.send_signal(signal.SIGTERM)
            try:
                locust.wait(timeout=30)
            except Exception:
                locust.kill()
        if getattr(self, "mirror", None) is not None:
            self.mirror.stop()
        if getattr(self, "lb", None) is not None:
            self.lb.stop()
        if self.own_pods:
            for pod in (self.pods or {}).values():
                pod.kill()

    def paired_answers(self, bodies: list) -> tuple[list, list]:
        """The same bodies sent to both versions' doors: (stable's answers, the candidate's)."""
        assert self.pods is not None
        return judge.paired(
            self.model,
            self.pods[STABLE].http,
            self.pods[CANDIDATE].http,
            bodies,
            TOKEN,
            timeout=self.try_timeout_s,
            runtime=self.runtime,
        )

    def mirrored(self, n: int) -> list:
        """Up to `n` of the newest client requests the mirror copied and no step judged yet, as
        the judge sends them (deploy/mirror.replayable)."""
        return replayable(self.mirror.take(n), raw=self.runtime != "oip")

    def wait_for_clients(self, timeout: float = 120) -> None:
        """Until the Locust users have had a request answered (on a loaded machine Locust takes
        seconds to start): a judgement with no client traffic would show nothing of what clients
        get."""
        deadline = time.monotonic() + timeout
        while not any(e["ok"] for e in self.client_log()):
            if self.locust.poll() is not None:
                raise RuntimeError(f"Locust exited {self.locust.returncode}: see {self.work}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no client request answered in {timeout:g} s: {self.work}")
            time.sleep(0.2)

    def client_log(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(x) for x in self.log.read_text().splitlines() if x.strip()]

    def door(self) -> dict[str, dict[str, Any]]:
        """Per replica, REST + gRPC (the standby's counters are the stable replica's): the
        counters so far, the mean response time (ms), and the candidate's health as the door
        sees it (status, last check)."""
        out: dict[str, dict[str, Any]] = {}
        for r in self.lb.stats():
            name = STABLE if r["svname"] == STANDBY else r["svname"]
            if r["pxname"] in BACKENDS and name in (STABLE, CANDIDATE):
                s = out.setdefault(
                    name, dict.fromkeys(DOOR_COUNTERS, 0.0) | {"status": [], "checks": []}
                )
                for k in DOOR_COUNTERS:
                    s[k] += float(r.get(k) or 0)
                if r["svname"] == name:
                    check = (r.get("check_status") or "-").lstrip("* ")
                    s["status"].append(f"{r['status']} ({check})")
                    s["checks"].append(check)
                if r["pxname"] == BACKENDS[0] and r["svname"] == name:
                    s["rtime_ms"] = float(r.get("rtime") or 0)
        return out

    # -- one step ----------------------------------------------------------------------------
    def watch(self, seconds: float, door0: dict) -> None:
        """A canary step's client traffic for `seconds`, the door watched meanwhile. The door
        retries a request the candidate held past the try timeout (a stall), dropped or failed
        on another server, but a retried try does not count against the candidate (HAProxy's
        passive check sees a request's last try only): so at the first retry the candidate has
        caused, it is taken out of the rotation here (its health forced down; `rise 3600` keeps
        it out), and the step ends, as it does when the door took the candidate out itself."""
        self.taken_out = False
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            health = self.door()[CANDIDATE]
            if not all(x.startswith("UP") for x in health["status"]):
                return
            if health["wretr"] > door0[CANDIDATE]["wretr"]:
                self.lb.set_health(CANDIDATE, "down")
                self.taken_out = True
                return
            time.sleep(min(WATCH_S, left))

    def analyse(self, name: str, weight: int, since: float, door0: dict) -> dict:
        assert self.limits is not None and self.pods is not None
        # The door's view first: a candidate its health checks (or its first failed answer)
        # took out of the rotation this step has crashed or stalled; pairing requests with it
        # would only wait for timeouts.
        health = self.door()[CANDIDATE]
        went_down = health["chkdown"] - door0[CANDIDATE]["chkdown"]
        down = went_down > 0 or not all(x.startswith("UP") for x in health["status"])
        mirrored = 0
        if down:
            d = {k: health[k] - door0[CANDIDATE][k] for k in DOOR_COUNTERS}
            why = sorted({CHECKS[c] for c in health["checks"] if c in CHECKS})
            if self.taken_out:
                why.insert(
                    0,
                    f"{int(d['wretr'])} of its tries retried elsewhere (held past the "
                    f"{self.try_timeout_s:g} s try timeout, dropped or failed)"
                    + (
                        ": it stalls, its health checks still pass"
                        if all(c == "L7OK" for c in health["checks"])
                        else ""
                    ),
                )
            why += [
                f"{int(d[k])} {words} at the door"
                for k, words in (
                    ("eresp", "requests dropped or timed out"),
                    ("hrsp_5xx", "5xx answers"),
                    ("econ", "connections refused"),
                )
                if d[k]
            ]
            verdict = judge.Verdict(
                False,
                f"candidate_down: the door took the candidate out {int(went_down)} time(s) this "
                f"step ({'; '.join(why) or 'its health checks failed'}); now "
                f"{', '.join(health['status'])} (REST, gRPC)",
                {},
            )
        else:
            bodies = self.mirrored(self.judge_requests)
            mirrored = len(bodies)
            bodies += [self.draw() for _ in range(self.judge_requests - mirrored)]
            stable, candidate = self.paired_answers(bodies)
            self.paired[0].extend(stable)  # the judgement grows with the evidence: every paired
            self.paired[1].extend(candidate)  # request so far, the shadow's included
            verdict = judge.analyse(self.limits, *self.paired)
        door1 = self.door()
        door: dict[str, dict[str, Any]] = {}
        for server, label in ((STABLE, "stable"), (CANDIDATE, "candidate")):
            d: dict[str, Any] = {k: door1[server][k] - door0[server][k] for k in DOOR_COUNTERS}
            d["errors"] = d["hrsp_5xx"] + d["eresp"] + d["econ"]
            d["error_rate"] = d["errors"] / d["stot"] if d["stot"] else 0.0
            d["rtime_ms"] = door1[server].get("rtime_ms", 0.0)
            d["status"] = door1[server]["status"]
            door[label] = d
        clients = [e for e in self.client_log() if e["end"] >= since]
        failed = sum(not e["ok"] for e in clients)
        metrics = dict(verdict.metrics)
        rise = door["candidate"]["error_rate"] - door["stable"]["error_rate"]
        metrics["door_error_rate_increase"] = rise
        metrics["client_requests"], metrics["client_failures"] = len(clients), failed
        metrics["mirrored_requests"] = mirrored
        passed, reason = verdict.passed, verdict.reason
        if passed and rise > self.limits.max_error_rate_increase:
            passed = False
            c = door["candidate"]
            reason = (
                f"door_error_rate_increase {rise:.4f} not <= {self.limits.max_error_rate_increase:g}"
                f" (candidate errors at the door: {int(c['hrsp_5xx'])} 5xx, {int(c['eresp'])}"
                f" dropped or timed out, {int(c['econ'])} refused)"
            )
        if passed and failed:
            passed, reason = False, f"client_failures {failed} not <= 0"
        step = {
            "step": name,
            "candidate_weight_percent": weight,
            "passed": passed,
            "reason": reason,
            "metrics": {k: (None if v != v else round(v, 6)) for k, v in metrics.items()},
            "door": door,
        }
        self.say(render_step(step))
        return step

    # -- the sequence --------------------------------------------------------------------------
    def run(self) -> dict:
        began = time.time()
        steps: list[dict] = []
        outcome, reason = "promoted", "every step passed"
        try:
            self.say(f"rollout {self.model}: starting stable (a) and candidate (b) replicas")
            self.start()
            # Both versions warmed before they are timed: the stable one has the client load,
            # the candidate none yet, and a worker's first answers are its slowest.
            warm = [self.draw() for _ in range(WARM_UP)]
            assert self.pods is not None
            self.paired_answers(warm)
            self.wait_for_clients()  # the client load under way before the first judgement
            time.sleep(2)
            door0, since = self.door(), time.time()
            self.say("rollout: shadow (candidate weight 0: clients get stable's answers only)")
            steps.append(self.analyse("shadow", 0, since, door0))
            for percent in [] if not steps[-1]["passed"] else self.steps:
                self.lb.set_weight(STABLE, 100 - percent)
                self.lb.set_weight(CANDIDATE, percent)
                door0, since = self.door(), time.time()
                self.say(f"rollout: canary {percent} % (weights a={100 - percent} b={percent})")
                self.watch(self.step_s, door0)
                steps.append(self.analyse(f"canary {percent}%", percent, since, door0))
                if not steps[-1]["passed"]:
                    break
            if not steps[-1]["passed"]:
                self.lb.set_weight(STABLE, 100)  # all traffic back to stable, at once
                self.lb.set_weight(CANDIDATE, 0)
                # ...streams included: weight 0 still serves the streams stuck to the candidate;
                # in maintenance it serves none, and the stable version refuses their state (409).
                self.lb.set_state(CANDIDATE, "maint")
                outcome = "rolled back"
                reason = f"{steps[-1]['step']}: {steps[-1]['reason']}"
                self.say(f"rollout: ROLLED BACK at {reason}; all weight back to stable")
                time.sleep(2)  # clients keep being served by stable after the switch back
        finally:
            self.stop()
        clients = self.client_log()
        failed = [e for e in clients if not e["ok"]]
        if outcome == "promoted" and failed:
            outcome, reason = "rolled back", f"client_failures {len(failed)} not <= 0"
        version = candidate_version(self.candidate_mar)
        result = {
            "model": self.model,
            "stable": str(self.stable_mar),
            "candidate": str(self.candidate_mar),
            "candidate_version": version,
            "outcome": outcome,
            "reason": reason,
            "steps": steps,
            "clients": {
                "requests": len(clients),
                "failed": len(failed),
                "errors": sorted({str(e["error"])[:120] for e in failed}),
                "answered_by": {
                    STABLE: sum(e["ok"] and e.get("replica") in (STABLE, STANDBY) for e in clients),
                    CANDIDATE: sum(e["ok"] and e.get("replica") == CANDIDATE for e in clients),
                },
            },
            "thresholds": self.limits.model_dump() if self.limits else {},
            "seconds": round(time.time() - began, 1),
        }
        result["promotion"] = self.promote(version) if outcome == "promoted" else self.unpromoted()
        return result

    def promote(self, version: str | None) -> dict:
        cmd = (
            f"python -m deploy publish {self.candidate_mar} --model {self.model} --bucket <bucket>"
            f" && python -m deploy promote {self.model} {version} --stage production"
            " --bucket <bucket>"
        )
        if not self.bucket:
            return {"done": False, "stage": "production", "version": version, "command": cmd}
        from deploy.__main__ import main as store

        base = ["--bucket", self.bucket, *self.s3_args, "--no-progress"]
        model = ["--model", self.model]
        published = store(["publish", str(self.candidate_mar), *model, *base])
        if published not in (0, 1):  # 1: that version is published already
            raise RuntimeError(f"publishing {self.candidate_mar} failed ({published})")
        code = store(["promote", self.model, str(version), "--stage", "production", *base])
        return {"done": code == 0, "stage": "production", "version": version}

    def unpromoted(self) -> dict:
        where = f"s3://{self.bucket}" if self.bucket else "no bucket configured"
        return {"done": False, "stage": "production", "left_as_it_was": where}


def replicas(
    stable: dict[str, Path],
    candidate: dict[str, Path],
    work: Path,
    runtime: str = "torchserve",
) -> dict[str, Pod]:
    """The two replica sets, not started: `a` serving the stable archives ({model: .mar}), `b` the
    candidate's, with one stream-state key (one Secret for both, as one Service's pods), each pod
    with `runtime` (its RUNTIME: torchserve or oip)."""
    key = secrets.token_urlsafe(32)
    config = pod_config("cpu")
    return {
        name: Pod(work / name, archives, [TOKEN], config, state_key=key, runtime=runtime)
        for name, archives in ((STABLE, stable), (CANDIDATE, candidate))
    }


def candidate_version(mar: Path) -> str | None:
    from deploy.s3.archive_info import read_training_manifest

    try:
        return str(read_training_manifest(mar).get("version"))
    except Exception:
        return None


def render_step(step: dict) -> str:
    m, d = step["metrics"], step["door"]
    keep = [k for k in m if k not in ("client_requests", "client_failures", "mirrored_requests")]
    rows = [f"  {k:<26} {'' if m[k] is None else format(m[k], '.4f')}" for k in keep]
    rows.append(
        "  door (this step)           "
        + "; ".join(
            f"{side}: {int(x['stot'])} req, {int(x['errors'])} err, {x['rtime_ms']:.0f} ms mean"
            + (f", {int(x['wretr'] + x['wredis'])} retried" if x["wretr"] + x["wredis"] else "")
            for side, x in d.items()
        )
    )
    rows.append(
        f"  clients (this step)        {m['client_requests']} req, {m['client_failures']} failed;"
        f" {m.get('mirrored_requests') or 0} of the paired requests mirrored from them"
    )
    word = "PASS" if step["passed"] else "FAIL"
    return f"[{step['step']}] {word}: {step['reason']}\n" + "\n".join(rows)


def render(result: dict) -> str:
    c = result["clients"]
    lines = [
        f"rollout {result['model']}: {result['outcome'].upper()} ({result['reason']})",
        f"  candidate {result['candidate']} (version {result['candidate_version']})",
        f"  clients: {c['requests']} requests, {c['failed']} failed; answered by stable "
        f"{c['answered_by'][STABLE]}, candidate {c['answered_by'][CANDIDATE]}",
    ]
    p = result["promotion"]
    if result["outcome"] == "promoted":
        lines.append(
            f"  promotion: production -> {p['version']}"
            if p["done"]
            else f"  promotion: no bucket configured; to promote:\n    {p['command']}"
        )
    else:
        lines.append(f"  promotion: none (production stage: {p['left_as_it_was']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m rehearsal.rollout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model")
    p.add_argument("--candidate", type=Path, required=True, help="the candidate's .mar")
    p.add_argument("--stable", type=Path, help="default: model_store/<model>.mar")
    p.add_argument(
        "--steps", type=lambda v: [int(x) for x in v.split(",") if x], default=[5, 25, 50, 100]
    )
    p.add_argument("--step-s", type=float, default=10.0, help="client traffic per canary step")
    p.add_argument(
        "--judge-requests", type=int, default=100, help="paired requests added at each step"
    )
    p.add_argument("--users", type=int, default=4, help="Locust users through the balancer")
    p.add_argument(
        "--try-timeout-s",
        type=float,
        default=10.0,
        help="how long one try waits for an answer before the door retries it elsewhere",
    )
    p.add_argument(
        "--runtime",
        choices=judge.RUNTIMES,
        default=os.environ.get("RUNTIME") or "torchserve",
        help="what both replica sets serve with (default: $RUNTIME, else torchserve)",
    )
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "rollout")
    p.add_argument("--bucket", default=os.environ.get("MODEL_BUCKET") or None)
    p.add_argument("--prefix", default=os.environ.get("MODEL_PREFIX", "models"))
    p.add_argument("--endpoint-url")
    args = p.parse_args(argv)
    stable = args.stable or ROOT / "model_store" / f"{args.model}.mar"
    for path in (stable, args.candidate):
        if not path.is_file():
            print(f"rollout: {path}: no such archive", file=sys.stderr)
            return 2
    if get(args.model).samples().light_request is None:
        print(f"rollout: {args.model} has no light_request for the client load", file=sys.stderr)
        return 2
    if args.runtime == "oip":  # the judge's and the clients' bodies as inference requests
        try:
            judge.oip_request(get(args.model).samples().light_request(0), args.model)
        except ValueError as e:
            print(f"rollout: {args.model} over the OIP: {e}", file=sys.stderr)
            return 2
    if not all(0 < s <= 100 for s in args.steps) or args.steps != sorted(args.steps):
        print("rollout: --steps must rise within 1..100", file=sys.stderr)
        return 2
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    s3 = ["--prefix", args.prefix] + (
        ["--endpoint-url", args.endpoint_url] if args.endpoint_url else []
    )
    r = Rollout(
        args.model,
        stable.resolve(),
        args.candidate.resolve(),
        args.work,
        steps=args.steps,
        step_s=args.step_s,
        judge_requests=args.judge_requests,
        users=args.users,
        try_timeout_s=args.try_timeout_s,
        runtime=args.runtime,
        bucket=args.bucket,
        s3_args=s3,
    )
    result = r.run()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"rollout-{args.model}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(render(result))
    return 0 if result["outcome"] == "promoted" else 1


if __name__ == "__main__":
    sys.exit(main())
