"""What the fuzz suites accept as an answer (reliability/probes.py)."""

from reliability.probes import judge_answer


def test_a_float32_answer_the_client_asked_for_is_a_prediction():
    raw = b"\x00\x00\x80\x3f" * 8
    assert judge_answer(200, raw, "application/octet-stream").ok
    assert not judge_answer(200, raw[:-1], "application/octet-stream").ok  # not whole floats
    assert not judge_answer(200, b"", "application/octet-stream").ok
    assert not judge_answer(200, raw, "text/plain").ok  # binary without saying so


def test_json_reasons_and_server_errors_are_judged_as_before():
    assert judge_answer(400, b'{"error": "bad", "kind": "bad_field"}').ok
    assert not judge_answer(400, b"bad").ok
    assert not judge_answer(503, b'{"error": "x"}').ok
    assert judge_answer(200, b'{"label": "positive"}', "application/json").ok


def test_the_report_says_whether_the_surface_invariants_held(tmp_path):
    from reliability.report import summarize, write

    held = {"section": "surface-rest", "inputs": 3, "statuses": {}, "seconds": 1.0}
    broke = {"section": "surface-grpc", "inputs": 2, "statuses": {}, "seconds": 1.0}
    md, _ = write(summarize([held | {"invariants_held": True}, broke], 1, 10), tmp_path)
    text = md.read_text()
    assert "REST routes, methods, headers): 3 generated requests" in text
    assert "no worker restarted" in text and "gRPC RPCs): 2 generated requests" in text
    assert "FAILED: an invariant broke" in text
