"""Figures recorded by the suites → reports/reliability.json and a short reliability.md."""

from __future__ import annotations

import json
from pathlib import Path


def summarize(records: list[dict], pytest_rc: int, examples: int) -> dict:
    by = {}
    for r in records:
        by.setdefault(r["section"], []).append(r)
    fuzz = by.get("fuzz", [])
    kill = by.get("worker_kill", [{}])[-1]
    return {
        "suite_passed": pytest_rc == 0,
        "fuzz_examples_requested": examples,
        "inputs_tried": sum(r["inputs"] for r in fuzz),
        "models_fuzzed": sorted({m for r in fuzz for m in r["models"]}),
        "real_models": all(r["real_models"] for r in fuzz) if fuzz else None,
        "server_errors_5xx": sum(r["server_errors"] for r in fuzz),
        "worker_restarts_from_bad_input": sum(r["worker_restarts"] for r in fuzz),
        "requests_lost_after_worker_kill": kill.get("lost"),
        "recovery_s_after_worker_kill": kill.get("recovery_s"),
        "sections": by,
    }


def write(summary: dict, out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    js, md = out / "reliability.json", out / "reliability.md"
    js.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    s = summary["sections"]
    kill = s.get("worker_kill", [{}])[-1]
    queue = s.get("queue_full", [{}])[-1]
    env = s.get("worker_env", [{}])[-1]
    recovery = summary["recovery_s_after_worker_kill"]
    lines = [
        "# Reliability and security report",
        "",
        f"Suite passed: **{summary['suite_passed']}**. Models: {', '.join(summary['models_fuzzed']) or 'none'}"
        f"{'' if summary['real_models'] else ' (stand-in archive, not the real models)'}.",
        "",
        "| Figure | Value | Target |",
        "|---|---|---|",
        f"| Malformed inputs tried | {summary['inputs_tried']} | {summary['fuzz_examples_requested']} requested |",
        f"| 5xx answers to bad input | {summary['server_errors_5xx']} | 0 |",
        f"| Worker restarts from bad input | {summary['worker_restarts_from_bad_input']} | 0 |",
        f"| Requests lost to a worker SIGKILL | {kill.get('lost')} of {kill.get('requests')} "
        f"({kill.get('clients')} clients; statuses {kill.get('lost_statuses')}) | only those in flight |",
        f"| Recovery after the kill | {recovery if recovery is None else f'{recovery:.2f} s'} | < 60 s |",
        f"| Full queue (size {queue.get('job_queue_size')}): 503s / 200s of {queue.get('sent')} | "
        f"{queue.get('refused_503')} / {queue.get('answered')}, slowest 503 "
        f"{(queue.get('slowest_503_s') or 0):.2f} s | 503 in < 5 s |",
        f"| Secrets leaked into the worker env | {env.get('leaked')} (control: {env.get('control_leaked')}) | [] |",
        "",
        "Statuses seen by the fuzzer (model:status → count):",
        "",
    ]
    for r in s.get("fuzz", []):
        lines.append(f"- {json.dumps(r['statuses'])} in {r['seconds']} s")
        lines += [f"  - FAILURE: {f}" for f in r.get("failures", [])]
    for name, what in (
        ("surface-rest", "REST routes, methods, headers"),
        ("surface-grpc", "gRPC RPCs"),
    ):
        for r in s.get(name, []):
            lines.append(
                f"- Surface ({what}): {r['inputs']} generated requests, each beside valid ones; "
                + (
                    "no worker restarted, neighbours unchanged"
                    if r.get("invariants_held")
                    else "FAILED: an invariant broke (the test's output says which)"
                )
                + f"; statuses {json.dumps(r['statuses'])} in {r['seconds']} s"
            )
    for r in s.get("overload", []):
        lines.append(
            f"- Overload ({r['case']}): {r['requests']} requests, {r['client_timeouts']} client "
            f"timeouts, short-text p99 {r['small_200_p99_s']} s, 503 p99 {r['refusal_503_p99_s']} s, "
            f"normal answer {r['normal_answer_after_stop_s']} s after the load stopped "
            "(overload.md)"
        )
    lines += ["", "Raw figures: reliability.json. Method and limits: docs/reliability.md.", ""]
    md.write_text("\n".join(lines))
    return md, js
