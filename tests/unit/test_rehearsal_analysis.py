"""How `make rehearse` attributes lost requests to its events and judges them."""

import json

from rehearsal.__main__ import analyse, verdict
from tools.frequency.rehearsal import problems as stream_problems
from tools.frequency.rehearsal import summarise


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


def attempt(t, replica="a", ok=True, chunk=0, stream=0):
    error = None if ok else "ConnectionError: connection refused"
    return {"stream": stream, "chunk": chunk, "start": t, "end": t + 0.05, "replica": replica} | {
        "status": 200 if ok else None,
        "ok": ok,
        "error": error,
    }


def streams_run(extra_attempts=(), max_diff=2e-7, replicas=("a", "b")):
    attempts = [attempt(t, replica="ab"[t % 2], chunk=t % 8, stream=t // 8) for t in range(40)]
    attempts += list(extra_attempts)
    streams = [
        {"stream": n, "body": ("json", "float32")[n % 2], "start": 8 * n, "end": 8 * n + 7.5}
        | {"error": None, "max_diff": max_diff, "rms": 0.4, "replicas": list(replicas) * 4}
        for n in range(5)
    ]
    events = [
        {"event": "rolling restart of a", "start": 10, "end": 20},
        {"event": "kill a", "start": 30, "end": 31},
    ]
    summary = summarise(attempts, streams, events)
    return summary, stream_problems(summary)


def test_streams_equal_to_whole_on_both_replicas_pass_and_are_counted_per_replica():
    summary, problems = streams_run()
    assert problems == []
    assert summary["chunks_by_replica"] == {"a": 20, "b": 20} and summary["streams_on_both"] == 5
    assert [e["streams_open"] for e in summary["events"]] == [2, 1]


def test_chunked_differing_from_whole_fails_the_rehearsal():
    _, problems = streams_run(max_diff=3e-5)
    assert len(problems) == 1 and "chunked != whole" in problems[0]


def test_chunks_all_on_one_replica_fail_the_rehearsal():
    summary, problems = streams_run(replicas=("a",))
    assert any("both replicas" in p for p in problems)


def test_a_resent_chunk_is_allowed_in_a_kill_but_not_in_a_rolling_restart():
    _, problems = streams_run([attempt(30.5, replica=None, ok=False)])
    assert problems == []
    _, problems = streams_run([attempt(15.0, replica=None, ok=False)])
    assert len(problems) == 1 and "rolling restart of a" in problems[0]
    _, problems = streams_run([attempt(38.0, replica=None, ok=False)])
    assert len(problems) == 1 and "outside events" in problems[0]
