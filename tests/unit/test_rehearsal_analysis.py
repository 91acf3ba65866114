"""How `make rehearse` attributes lost requests to its events and judges them."""

import json

from rehearsal.__main__ import analyse, verdict


def entry(start, end, ok=True, replica="a", kind="POST"):
    return {
        "start": start,
        "end": end,
        "type": kind,
        "ok": ok,
        "replica": replica,
        "error": None if ok else "HTTP 502: bad gateway",
    }


def run(tmp_path, entries, events):
    log = tmp_path / "requests.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in entries))
    result = analyse(log, events) | {"users": 2}
    return result, verdict(result)


def test_a_clean_run_passes_and_counts_both_replicas(tmp_path):
    entries = [entry(t, t + 0.05, replica="ab"[t % 2]) for t in range(100)]
    events = [{"event": "rolling restart of a", "start": 10, "end": 20}]
    result, problems = run(tmp_path, entries, events)
    assert problems == [] and result["answered_by"] == {"a": 50, "b": 50}
    assert result["events"][0]["requests"] == 13 and result["events"][0]["lost"] == 0


def test_a_request_lost_in_a_rolling_restart_fails_the_rehearsal(tmp_path):
    entries = [entry(t, t + 0.05, replica="ab"[t % 2]) for t in range(100)]
    entries.append(entry(15.0, 15.5, ok=False, replica=None))
    _, problems = run(
        tmp_path, entries, [{"event": "rolling restart of a", "start": 10, "end": 20}]
    )
    assert len(problems) == 1 and "rolling restart of a" in problems[0]


def test_a_kill_may_lose_what_was_in_flight_but_nothing_sent_after_it(tmp_path):
    base = [entry(t, t + 0.05, replica="ab"[t % 2]) for t in range(100)]
    kill = {"event": "kill a", "start": 50.5, "end": 51.5}
    in_flight = entry(50.48, 50.7, ok=False, replica=None)
    result, problems = run(tmp_path, base + [in_flight], [dict(kill)])
    assert problems == [] and result["events"][0]["in_flight_at_kill"] == 1
    sent_after = entry(50.8, 50.9, ok=False, replica=None)
    _, problems = run(tmp_path, base + [in_flight, sent_after], [dict(kill)])
    assert len(problems) == 1 and "kill a" in problems[0]
