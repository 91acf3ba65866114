"""deploy/rollout.py: every model's thresholds parse, and the verdict names the failing metric."""

import base64
import json
import re
from types import SimpleNamespace

import pytest
from pydantic import ValidationError

from deploy import rollout
from deploy.rollout import Exchange, Thresholds, analyse
from handlers.registry import names


@pytest.mark.parametrize("model", names())
def test_every_model_has_valid_thresholds(model: str) -> None:
    assert rollout.thresholds(model).max_error_rate_increase >= 0


def test_thresholds_refuse_unknown_keys_and_missing_metric() -> None:
    base = {
        "kind": "classifier",
        "max_ood_rate_shift": 0.1,
        "max_error_rate_increase": 0,
        "max_p99_ratio": 2,
        "min_requests": 1,
    }
    with pytest.raises(ValidationError):
        Thresholds.model_validate(base | {"min_label_agreeement": 0.9})
    with pytest.raises(ValidationError):
        Thresholds.model_validate(base)


def _ans(label: str, p: float) -> Exchange:
    return Exchange(200, 0.01, {"label": label, "probabilities": {"a": p, "b": 1 - p}})


def test_identical_answers_pass_and_flipped_labels_fail() -> None:
    limits = rollout.thresholds("tabular")
    stable = [_ans("a", 0.9)] * 100
    assert analyse(limits, stable, stable).passed
    flipped = [_ans("b", 0.1)] * 10 + [_ans("a", 0.9)] * 90
    v = analyse(limits, stable, flipped)
    assert not v.passed and v.reason.startswith("label_agreement 0.9000")


def _signal(shift: float) -> Exchange:
    """A frequency answer as served (answer_json): components a list, each with its samples."""
    comps = [{"frequency": f, "signal": [0.5 + shift, -0.5 + shift], "std": [0.1, 0.1]}
             for f in (1.0, 3.0)]  # fmt: skip
    return Exchange(200, 0.01, {"components": comps, "out_of_distribution": False})


def test_frequency_answers_are_compared_by_their_components() -> None:
    limits = rollout.thresholds("frequency")
    stable = [_signal(0.0)] * 30
    same = analyse(limits, stable, stable)
    assert same.passed and same.metrics["component_mad"] == 0.0
    drifted = analyse(limits, stable, [_signal(0.2)] * 30)
    assert not drifted.passed and drifted.reason.startswith("component_mad 0.2000")


def test_candidate_errors_fail() -> None:
    limits = rollout.thresholds("tabular")
    stable = [_ans("a", 0.9)] * 100
    cand = [Exchange(503, 0.01)] + stable[1:]
    v = analyse(limits, stable, cand)
    assert not v.passed and "error_rate_increase" in v.reason


def test_a_candidate_that_does_not_answer_is_named_by_why_not_by_too_few_compared() -> None:
    """A stalled candidate (every request timed out) and a dead one (refused): the reason names the
    timeouts or the errors, not the `compared` count that both also fail."""
    limits = rollout.thresholds("tabular")
    stable = [_ans("a", 0.9)] * 40
    stalled = analyse(limits, stable, [Exchange(0, 10.0, timed_out=True)] * 40)
    assert not stalled.passed and stalled.reason == "timeout_rate_increase 1.0000 not <= 0"
    dead = analyse(limits, stable, [Exchange(0, 0.001)] * 40)
    assert not dead.passed and dead.reason == "error_rate_increase 1.0000 not <= 0"


def test_a_request_that_times_out_is_told_from_one_refused() -> None:
    import socket

    with socket.socket() as s:  # a listener that never answers: the request waits
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        waited = rollout.send(f"http://127.0.0.1:{s.getsockname()[1]}", "tabular", {}, None, 0.3)
        port = s.getsockname()[1]
    assert (waited.status, waited.timed_out) == (0, True)
    refused = rollout.send(f"http://127.0.0.1:{port}", "tabular", {}, None, 0.3)
    assert (refused.status, refused.timed_out) == (0, False)


def test_thresholds_set_impossibly_loose_would_promote_every_label_flipped() -> None:
    """The bad candidate of tests/integration/test_rollout.py (every label flipped, the same
    confidence) fails on label agreement alone: with that threshold at 0 it would be promoted."""
    limits = rollout.thresholds("tabular")
    stable = [_ans("a", 0.9)] * 50 + [_ans("b", 0.2)] * 50
    flipped = [_ans("b", 0.1)] * 50 + [_ans("a", 0.8)] * 50
    v = analyse(limits, stable, flipped)
    assert not v.passed and v.reason == "label_agreement 0.0000 not >= 0.97"
    assert v.metrics["entropy_shift"] < 1e-9  # nothing else would have caught it
    loose = limits.model_copy(update={"min_label_agreement": 0.0})
    assert analyse(loose, stable, flipped).passed


def test_p99_ratio_counts_latencies_under_the_floor_as_the_floor() -> None:
    limits = rollout.thresholds("tabular")
    assert limits.p99_floor_s == 0.1

    def at(latency: float) -> list[Exchange]:
        return [Exchange(200, latency, {"label": "a", "probabilities": {"a": 0.9, "b": 0.1}})] * 30

    fast = analyse(limits, at(0.01), at(0.03))  # 3x of nothing: scheduling noise
    assert fast.passed and fast.metrics["p99_ratio"] == 1.0
    slow = analyse(limits, at(0.01), at(0.5))
    assert not slow.passed and slow.reason == "p99_ratio 5.0000 not <= 3"


def _door(label: str, seen: list[str] | None = None):
    """A stand-in REST door on loopback answering every prediction with `label` (each request's
    path appended to `seen`)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Answer(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            if seen is not None:
                seen.append(self.path)
            ok = self.path == "/predictions/tabular" and self.headers["Authorization"] == "Bearer t"
            body = json.dumps({"label": label, "probabilities": {"a": 0.9, "b": 0.1}}).encode()
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_judge_command_exits_by_the_verdict_and_writes_it(tmp_path, capsys) -> None:
    import json

    bodies, token = tmp_path / "bodies.jsonl", tmp_path / "tokens"
    bodies.write_text('{"mean radius": 14.0}\n' * 25)
    token.write_text("t\n")
    (sa, a), (sb, b), (sc, c) = _door("a"), _door("a"), _door("b")
    try:
        common = ["--bodies", str(bodies), "--token-file", str(token)]
        out = tmp_path / "v.json"
        assert rollout.main(["judge", "tabular", "--stable", a, "--candidate", b, *common]) == 0
        assert "PASS: every metric within its threshold" in capsys.readouterr().out
        args = ["judge", "tabular", "--stable", a, "--candidate", c, *common, "--out", str(out)]
        assert rollout.main(args) == 1
        verdict = json.loads(out.read_text())
        assert verdict["passed"] is False
        assert verdict["reason"] == "label_agreement 0.0000 not >= 0.97"
        assert rollout.main(["judge", "nosuch", "--stable", a, "--candidate", b]) == 2
    finally:
        for s in (sa, sb, sc):
            s.shutdown()


def test_bodies_writes_held_out_payloads_a_judge_reads_back(tmp_path, capsys) -> None:
    """`bodies` is what a judge without the tools (the serving image's) reads with --bodies."""
    assert rollout.main(["bodies", "tabular", "--requests", "3", "--seed", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3
    bodies = [json.loads(x) for x in lines]
    assert bodies == rollout.judge_bodies("tabular", 3, seed=1)
    assert all(isinstance(b, dict) and b for b in bodies)  # a record, or {"records": [...]}


def test_an_oip_request_holds_each_field_as_an_input_one_element_per_record() -> None:
    one = rollout.oip_request({"mean radius": 14.1, "grade": "b", "flag": True}, "tabular")
    assert one == {
        "inputs": [
            {"name": "mean radius", "datatype": "FP64", "shape": [1], "data": [14.1]},
            {"name": "grade", "datatype": "BYTES", "shape": [1], "data": ["b"]},
            {"name": "flag", "datatype": "BOOL", "shape": [1], "data": [True]},
        ]
    }
    two = rollout.oip_request({"records": [{"x": 1, "y": "a"}, {"x": 2.5, "y": "b"}]}, "tabular")
    assert two["inputs"][0] == {"name": "x", "datatype": "FP64", "shape": [2], "data": [1, 2.5]}
    for bad in ({"image": [[0, 1], [1, 0]]}, {"records": [{"x": 1}, {"y": 2}]}, {"records": []}):
        with pytest.raises(ValueError):
            rollout.oip_request(bad, "tabular")


def test_oip_answers_read_back_into_the_rows_the_judge_compares() -> None:
    outputs = [
        {"name": "label", "datatype": "BYTES", "shape": [2], "data": ["benign", "malignant"]},
        {
            "name": "probabilities",
            "datatype": "FP64",
            "shape": [2, 2],
            "data": [0.9, 0.1, 0.3, 0.7],
        },
        {"name": "out_of_distribution", "datatype": "BOOL", "shape": [2], "data": [False, True]},
    ]
    rows = rollout.oip_rows({"model_name": "tabular", "outputs": outputs}, "tabular")
    assert rows == [
        {"label": "benign", "probabilities": [0.9, 0.1], "out_of_distribution": False},
        {"label": "malignant", "probabilities": [0.3, 0.7], "out_of_distribution": True},
    ]
    nested = [o | {"data": [o["data"][:2], o["data"][2:]]} for o in outputs[1:2]]
    assert rollout.oip_rows({"outputs": nested}, "tabular") == [
        {"probabilities": [0.9, 0.1]},
        {"probabilities": [0.3, 0.7]},
    ]
    one = rollout.oip_rows(
        {"outputs": [{"name": "label", "shape": [1], "data": ["benign"]}]}, "tabular"
    )
    assert one == {"label": "benign"}  # one record's answer is one row, as its JSON answer is
    error = {"error": "bad_field", "kind": "bad_field"}
    assert rollout.oip_rows(error, "tabular") == error
    stable = Exchange(200, 0.01, rows)
    flipped = Exchange(200, 0.01, [r | {"label": "x"} for r in rows])
    limits = rollout.thresholds("tabular").model_copy(update={"min_requests": 1})
    assert not analyse(limits, [stable], [flipped]).passed
    assert analyse(limits, [stable], [stable]).passed


def test_an_oip_judge_refuses_bodies_it_cannot_send_as_tensors_before_sending_any(
    tmp_path, capsys
) -> None:
    """The rollout-oip overlay's analysis Job runs the judge with --runtime oip: a body that is no
    request of the model's tensors (a digits request mixing an encoded file and a grid: the
    contract takes one input or the other) is refused with a clear reason and exit 2, not a
    traceback from a worker thread; nothing is sent, also of the good bodies before it."""
    bodies = tmp_path / "bodies.jsonl"
    good = json.dumps({"image": [[0, 1], [1, 0]]})
    bodies.write_text(f"{good}\n" * 2 + json.dumps({"images": [[[0, 1]], "iVBORw0KGgo="]}) + "\n")
    seen: list[str] = []
    server, url = _door("a", seen)
    try:
        argv = ["judge", "digits", "--stable", url, "--candidate", url, "--bodies", str(bodies)]
        assert rollout.main([*argv, "--runtime", "oip"]) == 2
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert err.startswith("rollout: digits over the OIP: a request's images go as one input"), err
    assert seen == []


# --- every model's held-out bodies over the Open Inference Protocol -------------------------------


def _contract_settings(model: str, request: pytest.FixtureRequest) -> object:
    """What the model's tensor contract reads of its settings: the real ones where they are a
    trained export's (tabular's schema, from the session's tiny export), else the few fields
    its inputs and outputs name (the served frequencies, sample rate and limits; the text and image
    kits' counts at their defaults)."""
    if model == "tabular":
        from handlers.service import ModelService
        from tests.fixtures.served import handler_config

        artifacts = request.getfixturevalue("tabular_artifacts")
        return ModelService.from_dir(artifacts, name=model, config=handler_config(model)).settings
    from tools.frequency.samples import EXTRACT, SAMPLE_RATE

    return SimpleNamespace(
        export=SimpleNamespace(classes=tuple("0123456789"), labels=("negative", "positive")),
        sample_rate=int(SAMPLE_RATE),
        frequencies=tuple(EXTRACT[-1]),
        max_samples=1 << 20,
        max_texts=16,
        max_images=64,
    )


def _held_out(model: str) -> list:
    """The bodies a rollout judges `model` on: its held-out load payloads (the draw `make rollout`
    and `judge` make, one and several items a body), its clients' light request, and for digits
    an encoded image (its JSON form's other kind)."""
    from tools.registry import get

    samples = get(model).samples()
    bodies = rollout.judge_bodies(model, 24, seed=3) + [samples.light_request(1)]
    if model == "digits":
        png, _, _ = samples.binary_example()
        b64 = base64.b64encode(png).decode()
        bodies += [{"image": b64}, {"images": [b64, b64]}]
    if model == "sentiment":
        bodies.append({"texts": ["good", "a dull, long film"]})
    if model == "frequency":
        bodies.append(bodies[0] | {"stream": True, "band": False, "frequencies": "1,3"})
    return bodies


def _server_reads(encoded: bytes, headers: dict[str, str]) -> tuple[list, dict]:
    """The request as the OIP server's edge reads it (oip/edge.py: JSON, or the binary-data
    extension), as the input items and parameters oip/contract.py reads."""
    from oip.edge import binary_head, check_rest

    lower = {k.lower(): v for k, v in headers.items()}
    head = check_rest(encoded, lower)
    raws: list = [None] * len(head.inputs)
    if not lower.get("content-type", "").startswith("application/json"):
        head, raws = binary_head(encoded, lower["inference-header-content-length"])
    items = [
        SimpleNamespace(name=i.name, datatype=i.datatype, shape=i.shape, data=i.data, _raw_data=raw)
        for i, raw in zip(head.inputs, raws, strict=True)
    ]
    return items, dict(head.parameters or {})


def _texts(body: dict) -> tuple[str, ...]:
    """A sentiment JSON body's texts as the text kit reads them."""
    from handlers.codec import Payload
    from handlers.kits.text.inputs import parse_texts

    return parse_texts(Payload("json", body), 1 << 20, 1 << 10).texts


@pytest.mark.parametrize("model", names())
def test_every_models_held_out_bodies_become_the_tensors_its_contract_reads(
    model: str, request: pytest.FixtureRequest
) -> None:
    """Each held-out body, as the judge sends it over the OIP, is read by the real server's edge
    and the model's own tensor contract (oip/contract.py) back into the request the model's JSON
    clients send: the same texts, images, signal and options, records."""
    from oip.contract import Contract
    from tests.support import wire

    settings = _contract_settings(model, request)
    contract = Contract(model, settings)
    for body in _held_out(model):
        encoded, headers = rollout.oip_encode(rollout.oip_request(body, model))
        items, parameters = _server_reads(encoded, headers)
        native = wire.native(contract, contract.read_inputs(items), parameters)
        if model == "frequency":
            from handlers.kits.signal import codec
            from handlers.service import Request

            got = codec.decode_request(Request(native.body, native.headers), settings)
            want = codec.decode_request(Request(body), settings)
            assert got.signal.tobytes() == want.signal.tobytes()
            assert (got.frequencies, got.selectors, got.sample_rate) == (
                want.frequencies, want.selectors, want.sample_rate,
            )  # fmt: skip
            assert (got.start, got.state, got.band) == (want.start, want.state, want.band)
            continue
        sent = json.loads(native.body)
        if model == "sentiment":
            assert tuple(sent["texts"]) == _texts(body)
        elif model == "digits":
            images = body.get("images", [body.get("image")])
            assert len(sent["images"]) == len(images)
            for got, want in zip(sent["images"], images, strict=True):
                assert got == want  # the same base64, or the same grid (its numbers as floats)
        else:
            records = body.get("records", [body])
            assert sent["records"] == [{k: float(v) for k, v in r.items()} for r in records]


@pytest.mark.parametrize(
    ("model", "body", "why"),
    [
        ("digits", {"images": [[[0, 1], [1, 0]], "iVBORw0KGgo="]}, "one input"),
        ("digits", {"images": [[[0, 1], [1, 0]], [[0, 1, 2]]]}, "same size"),
        ("digits", {"image": "not base64!"}, "base64"),
        ("digits", {"image": [[0, True]]}, "numbers"),
        ("digits", {"image": [[0]], "images": [[[0]]]}, '"image" or "images"'),
        ("sentiment", {"texts": ["good", 3]}, "string"),
        ("sentiment", {"text": "good", "lang": "en"}, "'lang'"),
        ("frequency", {"signal": [[0.0, 1.0]]}, "flat"),
        ("frequency", {"signal": [0.0, 1.0], "frequencies": [1, True]}, "frequencies"),
        ("frequency", {"signal": [0.0], "window": 3}, "'window'"),
        ("frequency", {"frequencies": [1]}, "'signal'"),
        ("tabular", {"image": [[0, 1], [1, 0]]}, "named scalars"),
        ("tabular", {"records": [{"x": 1}, {"y": 2}]}, "same fields"),
    ],
)
def test_a_body_that_is_not_the_models_tensors_is_refused_saying_why(
    model: str, body: object, why: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        rollout.oip_request(body, model)


def test_frequency_oip_answers_read_back_into_its_json_answers_components() -> None:
    """The signal kit's output tensors (handlers/kits/signal/oip.py) as its JSON answer
    (codec.answer_json): one component per frequency, its signal and std; the judge compares them."""
    outputs = [
        {"name": "signal", "datatype": "FP32", "shape": [2, 3], "data": [1, 2, 3, 4, 5, 6]},
        {"name": "std", "datatype": "FP32", "shape": [2, 3], "data": [[0.1] * 3, [0.2] * 3]},
        {"name": "frequencies", "datatype": "FP64", "shape": [2], "data": [1.0, 3.0]},
        {"name": "sample_rate", "datatype": "INT64", "shape": [1], "data": [1000]},
        {"name": "residual", "datatype": "FP64", "shape": [1], "data": [0.01]},
        {"name": "out_of_distribution", "datatype": "BOOL", "shape": [1], "data": [True]},
    ]
    got = rollout.oip_rows({"model_name": "frequency", "outputs": outputs}, "frequency")
    assert got == {
        "sample_rate": 1000,
        "out_of_distribution": True,
        "residual": 0.01,
        "nonstationarity": None,
        "offset": None,
        "components": [
            {"frequency": 1.0, "signal": [1, 2, 3], "std": [0.1] * 3},
            {"frequency": 3.0, "signal": [4, 5, 6], "std": [0.2] * 3},
        ],
    }
    bandless = rollout.oip_rows({"outputs": [outputs[0], outputs[2]]}, "frequency")
    assert [c.keys() for c in bandless["components"]] == [{"frequency", "signal"}] * 2
    shifted = [outputs[0] | {"data": [x + 0.5 for x in outputs[0]["data"]]}, *outputs[1:]]
    moved = rollout.oip_rows({"outputs": shifted}, "frequency")
    limits = rollout.thresholds("frequency").model_copy(update={"min_requests": 1})
    verdict = analyse(limits, [Exchange(200, 0.01, got)], [Exchange(200, 0.01, moved)])
    assert verdict.metrics["component_mad"] == pytest.approx(0.5)
    assert not verdict.passed


def test_a_judge_with_copies_judges_on_the_clients_requests_and_fails_on_too_few(
    tmp_path, capsys
) -> None:
    """--copies: the newest client requests the mirror's recorder (deploy/mirror.py) holds for the
    model, on the route the runtime serves, each taken once; fewer than --min-copies (default: all
    of --requests) fail the judgement whatever --bodies holds; a recorder that cannot be reached
    is no evidence either."""
    from deploy.mirror import Copy, Recorder

    recorder = Recorder(("127.0.0.1", 0)).start()
    copies = f"http://127.0.0.1:{recorder.server_address[1]}"
    for i in range(30):
        recorder.add(Copy("/predictions/tabular", "application/json", b'{"mean radius": 14.0}', i))
        recorder.add(Copy("/predictions/digits", "application/json", b'{"image": [[0]]}', i))
        recorder.add(Copy("/v2/models/tabular/infer", "application/json", b'{"inputs": []}', i))
    recorder.add(Copy("/predictions/tabular", "application/json", b"not json", 31))
    bodies, token, out = tmp_path / "bodies.jsonl", tmp_path / "tokens", tmp_path / "v.json"
    bodies.write_text('{"mean radius": 14.0}\n' * 25)
    token.write_text("t\n")
    seen: list[str] = []
    (sa, a), (sb, b) = _door("a", seen), _door("a", seen)
    judge = ["judge", "tabular", "--stable", a, "--candidate", b, "--token-file", str(token)]
    judge += ["--copies", copies, "--out", str(out)]
    try:
        # The newest 21: one not JSON (skipped), so 20 of the clients' requests, too few for 21.
        assert rollout.main([*judge, "--requests", "21"]) == 1
        verdict = json.loads(out.read_text())
        assert verdict["reason"] == "mirrored_requests 20 not >= 21: too few client requests"
        for i in range(21):
            recorder.add(
                Copy("/predictions/tabular", "application/json", b'{"mean radius": 14.0}', i)
            )
        assert rollout.main([*judge, "--requests", "21", "--min-copies", "20"]) == 0
        verdict = json.loads(out.read_text())
        assert verdict["passed"] and verdict["metrics"]["mirrored_requests"] == 21
        assert verdict["metrics"]["requests"] == 21
        assert recorder.taken == 42 and set(seen) == {"/predictions/tabular"} and len(seen) == 42
        # 10 tabular predictions left: too few for 25, with or without held-out bodies.
        for left, extra in ((10, []), (0, ["--bodies", str(bodies)])):
            assert rollout.main([*judge, "--requests", "25", *extra]) == 1
            verdict = json.loads(out.read_text())
            assert verdict["reason"].startswith(f"mirrored_requests {left} not >= 25")
        recorder.add(Copy("/predictions/tabular", "application/json", b'{"mean radius": 9}', 40))
        assert rollout.main([*judge, "--requests", "25", "--min-copies", "1", *extra]) == 0
        verdict = json.loads(out.read_text())
        assert verdict["metrics"]["mirrored_requests"] == 1 and verdict["metrics"]["requests"] == 25
        # The other routes' and models' copies are still there for their own judgements.
        assert recorder.take(100, model="digits") and recorder.take(100, route="infer")
        recorder.shutdown()
        recorder.server_close()
        assert rollout.main([*judge, "--bodies", str(bodies)]) == 1
        verdict = json.loads(out.read_text())
        assert verdict["reason"].startswith("mirrored_requests 0 not >= 40: too few client")
        assert f"the recorder at {copies}" in verdict["reason"]
    finally:
        for s in (sa, sb):
            s.shutdown()
    capsys.readouterr()


def test_mirrored_requests_that_are_not_json_are_sent_again_as_they_came_and_continuations_not():
    """A float32 signal (parameters in X- headers), a text/plain review or an image body is sent
    to both versions again as it came, its parameter headers kept and its credentials and request
    id not; a stream's continuation (its state in a header, a JSON field or an OIP parameter) is
    taken, not sent, since another version refuses its state by design; over the Open Inference
    Protocol a binary copy is taken, not sent."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import numpy as np
    import requests

    from deploy.mirror import JUDGE_HEADER, Raw, Recorder

    recorder = Recorder(("127.0.0.1", 0)).start()
    url = f"http://127.0.0.1:{recorder.server_address[1]}"
    signal = np.linspace(-1, 1, 16, dtype="<f4").tobytes()
    params = {"X-Sample-Rate": "100", "X-Frequencies": "1,3"}
    auth = {"Authorization": "Bearer t", "X-Request-ID": "r-1"}
    sent = [  # (path, content type, body, headers), oldest first
        ("/predictions/frequency", "application/octet-stream", signal, params),
        ("/predictions/frequency", "application/octet-stream", signal, {"X-Stream-State": "s"}),
        ("/predictions/frequency", "application/json", b'{"signal": [0.5], "state": "s"}', {}),
        ("/predictions/frequency", "application/json", b'{"signal": [0.5], "stream": true}', {}),
        ("/predictions/sentiment", "text/plain", b"A fine film.", {}),
        ("/v2/models/frequency/infer", "application/json",
         b'{"inputs": [], "parameters": {"state": "s"}}', {}),
        ("/v2/models/digits/infer", "application/octet-stream", b"\x89PNG", {}),
    ]  # fmt: skip
    try:
        for path, kind, body, headers in sent:
            r = requests.post(
                url + path, data=body, headers={"Content-Type": kind, **auth, **headers}
            )
            assert r.status_code == 204
        frequency = rollout.mirrored_bodies(url, "frequency", 10, "torchserve")
        assert frequency == [
            Raw("application/octet-stream", signal, tuple(params.items())),
            {"signal": [0.5], "stream": True},
        ]
        assert rollout.mirrored_bodies(url, "sentiment", 10, "torchserve") == [
            Raw("text/plain", b"A fine film.")
        ]
        assert rollout.mirrored_bodies(url, "frequency", 10, "oip") == []
        assert rollout.mirrored_bodies(url, "digits", 10, "oip") == []
        assert recorder.taken == len(sent) and not recorder.copies
    finally:
        recorder.shutdown()
        recorder.server_close()

    got: list[tuple[str, dict, bytes]] = []

    class Door(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(
                (
                    self.path,
                    dict(self.headers),
                    self.rfile.read(int(self.headers["Content-Length"])),
                )
            )
            answer = b'{"model": {"version": "1"}, "components": []}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_: object) -> None:
            pass

    door = ThreadingHTTPServer(("127.0.0.1", 0), Door)
    threading.Thread(target=door.serve_forever, daemon=True).start()
    try:
        exchange = rollout.send(
            f"http://127.0.0.1:{door.server_address[1]}", "frequency", frequency[0], "t"
        )
    finally:
        door.shutdown()
        door.server_close()
    assert exchange.status == 200 and exchange.body["components"] == []
    [(path, headers, body)] = got
    assert (path, body) == ("/predictions/frequency", signal)
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["X-Sample-Rate"] == "100" and headers["X-Frequencies"] == "1,3"
    assert headers[JUDGE_HEADER] == "1" and headers["Authorization"] == "Bearer t"
    assert "Accept" not in headers or "octet-stream" not in headers["Accept"]
