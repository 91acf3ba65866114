"""The mixed-load overload case: Locust against a real TorchServe serving a full-size model,
before (the settings this project had) and after (the model's model-config.yaml).

    python -m reliability.overload [--model M] [--users 64] [--duration-s 30] [--out reports]

The model is one with an overload case (tools/<model>/overload.py: `OVERLOAD`, a
tools.plugin.Overload of before, settings_shown, small, large(handler), full_size_artifacts(out);
the first registered by default).

A quarter of the users send the largest valid request, the rest a short text, back to back with a
30 s client timeout. When the load stops, single short requests probe how soon the server answers
normally again. Writes reports/overload.{json,md}; the figures go to docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import requests

from deploy.archive import build_archive
from reliability.record import record
from tests.support.torchserve import start_torchserve
from tools.plugin import Overload
from tools.registry import MODELS, get

ROOT = Path(__file__).resolve().parents[1]
LOCUST = Path(sys.executable).with_name("locust")

PROBES_AFTER_STOP_S = (0.0, 1.0, 2.0, 4.0)


def overload_models() -> list[str]:
    return [m.name for m in MODELS if m.overload() is not None]


def percentile(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def summarize(outcomes: list[dict], probes: list[dict], timeout_s: float) -> dict:
    def lat(kind: str | None, status: int) -> list[float]:
        return [
            o["latency_s"]
            for o in outcomes
            if o["status"] == status and (kind is None or o["kind"] == kind)
        ]

    counts: dict[str, int] = {}
    for o in outcomes:
        key = f"{o['kind']}:" + {0: "timeout", -1: "unanswered"}.get(o["status"], str(o["status"]))
        counts[key] = counts.get(key, 0) + 1
    answered = [o["latency_s"] for o in outcomes if o["status"] > 0]
    unanswered = [o["latency_s"] for o in outcomes if o["status"] <= 0]
    first_normal = next((p for p in probes if p["status"] == 200), None)
    return {
        "requests": len(outcomes),
        "counts": dict(sorted(counts.items())),
        "client_timeouts": sum(1 for o in outcomes if o["status"] == 0),
        "unanswered_at_stop": sum(1 for o in outcomes if o["status"] == -1),
        "oldest_unanswered_s": round(max(unanswered), 3) if unanswered else None,
        "other_statuses": sorted({o["status"] for o in outcomes} - {-1, 0, 200, 503}),
        "small_200_p50_s": percentile(lat("small", 200), 50),
        "small_200_p99_s": percentile(lat("small", 200), 99),
        "large_200_p50_s": percentile(lat("large", 200), 50),
        "large_200_p99_s": percentile(lat("large", 200), 99),
        "refusal_503_p50_s": percentile(lat(None, 503), 50),
        "refusal_503_p99_s": percentile(lat(None, 503), 99),
        "refusals_with_retry_after": sum(
            1 for o in outcomes if o["status"] == 503 and o.get("retry_after")
        ),
        "max_answer_s": round(max(answered), 3) if answered else None,
        "client_timeout_s": timeout_s,
        "probes_after_stop": probes,
        "normal_answer_after_stop_s": (
            round(first_normal["sent_after_stop_s"] + first_normal["latency_s"], 3)
            if first_normal
            else None
        ),
    }


def _probe(
    url: str, headers: dict, stop_at: float, probes: list[dict], timeout_s: float, body: dict
) -> None:
    for offset in PROBES_AFTER_STOP_S:
        time.sleep(max(0.0, stop_at + offset - time.monotonic()))
        sent = time.monotonic()
        try:
            status = requests.post(url, json=body, headers=headers, timeout=timeout_s).status_code
        except requests.RequestException:
            status = 0
        probes.append(
            {
                "sent_after_stop_s": round(sent - stop_at, 3),
                "status": status,
                "latency_s": round(time.monotonic() - sent, 3),
            }
        )


def _overload(model: str) -> Overload:
    hook = get(model).overload()
    if hook is None:
        raise SystemExit(f"{model} has no overload case (tools/{model}/overload.py)")
    return hook


def run_case(
    name: str, artifacts: Path, overrides: dict | None, work: Path, users: int, duration_s: int,
    timeout_s: float, model: str,
) -> dict:  # fmt: skip
    hook = _overload(model)
    case = work / name
    shutil.rmtree(case, ignore_errors=True)
    archive = build_archive(
        model, artifacts, case / "store-src", build_dir=case / "build", overrides=overrides
    )
    import yaml  # the archive's settings, as served

    served_cfg = yaml.safe_load(
        (case / "build" / "archive" / model / "model-config.yaml").read_text()
    )
    server = start_torchserve(case, {model: archive})
    try:
        url = f"{server.inference_url}/predictions/{model}"
        out = case / "outcomes.jsonl"
        env = os.environ | {
            "OVERLOAD_URL": url,
            "OVERLOAD_TOKEN": server.keys["inference"],
            "OVERLOAD_OUT": str(out),
            "OVERLOAD_TIMEOUT_S": str(timeout_s),
            "OVERLOAD_MODEL": model,
            "OVERLOAD_HANDLER": json.dumps(served_cfg.get("handler") or {}),
        }
        cmd = [
            str(LOCUST), "-f", str(ROOT / "loadtests" / "overload.py"), "--headless",
            "-u", str(users), "-r", str(users), "-t", f"{duration_s}s", "--only-summary",
            "--loglevel", "WARNING",
        ]  # fmt: skip
        probes: list[dict] = []
        started = time.monotonic()
        # Locust spends a few seconds importing before the clock starts; the probe waits for it.
        locust = subprocess.Popen(cmd, env=env, cwd=ROOT)
        time.sleep(3)
        prober = threading.Thread(
            target=_probe,
            args=(url, server.auth(), started + 3 + duration_s, probes, timeout_s, hook.small),
        )
        prober.start()
        locust.wait(timeout=duration_s + 120)
        prober.join()
        outcomes = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    finally:
        server.stop()
    summary = {
        "case": name,
        "settings": {k: served_cfg.get(k) for k in ("batchSize", "maxBatchDelay", "jobQueueSize")}
        | {"handler": {k: (served_cfg.get("handler") or {}).get(k) for k in hook.settings_shown}},
    }
    summary |= summarize(outcomes, probes, timeout_s)
    record("overload", **summary)
    return summary


def write(results: list[dict], out: Path, users: int, duration_s: int) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "overload.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = [
        ("requests answered or timed out", "requests"),
        ("client timeouts (no answer in 30 s)", "client_timeouts"),
        ("unanswered when the load stopped", "unanswered_at_stop"),
        ("oldest of those, s", "oldest_unanswered_s"),
        ("short text, 200: p50 s", "small_200_p50_s"),
        ("short text, 200: p99 s", "small_200_p99_s"),
        ("largest request, 200: p50 s", "large_200_p50_s"),
        ("503 refusals: p99 s", "refusal_503_p99_s"),
        ("503 refusals with Retry-After", "refusals_with_retry_after"),
        ("slowest answer s", "max_answer_s"),
        ("normal answer after the load stops, s", "normal_answer_after_stop_s"),
    ]
    lines = [
        f"# Overload: {users} clients for {duration_s} s, a quarter sending the largest valid request",
        "",
        "| | " + " | ".join(r["case"] for r in results) + " |",
        "|---|" + "---|" * len(results),
        "| settings | " + " | ".join(f"`{json.dumps(r['settings'])}`" for r in results) + " |",
    ]
    lines += [
        f"| {label} | " + " | ".join(str(r.get(key)) for r in results) + " |" for label, key in rows
    ]
    lines += [
        "",
        "Counts (kind:status): " + "; ".join(f"{r['case']} {r['counts']}" for r in results),
    ]
    md = out / "overload.md"
    md.write_text("\n".join(lines) + "\n")
    return md


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    choices = overload_models()
    p.add_argument("--model", choices=choices, default=choices[0] if choices else None)
    p.add_argument("--users", type=int, default=64)
    p.add_argument("--duration-s", type=int, default=30)
    p.add_argument("--timeout-s", type=float, default=30.0)
    p.add_argument("--cases", default="before,after", help="comma-separated: before, after")
    p.add_argument("--work", type=Path, default=ROOT / "build" / "overload")
    p.add_argument("--out", type=Path, default=ROOT / "reports")
    args = p.parse_args(argv)
    hook = _overload(args.model)
    artifacts = hook.full_size_artifacts(args.work / "artifacts")
    cases = {"before": dict(hook.before), "after": None}
    results = [
        run_case(
            name,
            artifacts,
            cases[name],
            args.work,
            args.users,
            args.duration_s,
            args.timeout_s,
            args.model,
        )
        for name in args.cases.split(",")
    ]
    md = write(results, args.out, args.users, args.duration_s)
    print(md.read_text())
    after = next((r for r in results if r["case"] == "after"), None)
    if after is None:
        return 0
    # The promise: every request answered within its timeout, as a 200 or a fast 503.
    oldest = after["oldest_unanswered_s"] or 0.0
    ok = after["client_timeouts"] == 0 and not after["other_statuses"] and oldest < args.timeout_s
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
