"""The same answers from both runtimes: every registered model's inputs sent to the session's real
TorchServe (`served`) and to the Open Inference Protocol server (`oip_server`) serving the same
archives, and each answer compared to the bit (both run the archive's own runtime from the same
packages). Refusals compared too: the same kind and reason from both.

The TorchServe request is what the model's tensor contract says a TorchServe client sends for those
tensors (handlers/<model>/oip.py `native`); its answer is read back into tensors by the same
contract (`answer`), and the model's JSON or float32 body is also checked against the OIP tensors
directly where it is plain JSON rows."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
import requests

from handlers import registry
from handlers.codec import Reply
from handlers.errors import KINDS
from tests.support import wire
from tests.support.oip_client import pack, unpack

pytestmark = pytest.mark.integration


@dataclass
class Case:
    name: str
    inputs: list[tuple[str, str, np.ndarray]]
    parameters: dict[str, Any] = field(default_factory=dict)


def _sine(freq: float, rate: float, n: int, phase: float = 0.0) -> np.ndarray:
    t = np.arange(n)
    return np.sin(2 * np.pi * freq * t / rate + phase).astype(np.float32)


def cases(model: str, settings: Any) -> list[Case]:
    """The inputs each registered model is compared on (a new model fails until it has some)."""
    if model == "sentiment":
        texts = [
            "a fine film with a great cast",
            "dull and far too long",
            "loved it",
            "an odd, uneven, sometimes lovely film " * 60,  # past the token limit: truncated
        ]
        return [Case("texts", [("text", "BYTES", np.array([t.encode() for t in texts], object))])]
    if model == "frequency":
        rate = float(settings.sample_rate)
        f0, f1 = settings.frequencies[0], settings.frequencies[-1]
        mixed = _sine(f0, rate, 300) + 0.5 * _sine(f1, rate, 300, 1.0)
        noisy = mixed + np.random.default_rng(7).normal(0, 0.3, 300).astype(np.float32)
        return [
            Case("every frequency", [("signal", "FP32", mixed)]),
            Case(
                "two frequencies",
                [("signal", "FP32", noisy)],
                {"frequencies": ",".join(f"{f:g}" for f in settings.frequencies[:2])},
            ),
        ]
    if model == "digits":
        from tools.digits import samples

        grid = np.asarray(samples.EXAMPLE["image"], dtype=np.float32)
        shifted = np.asarray(samples.light_request(1)["image"], dtype=np.float32)
        png, _, _ = samples.binary_example()
        return [
            Case("FP32 grids", [("grid", "FP32", np.stack([grid, shifted]))]),
            Case("UINT8 grid", [("grid", "UINT8", grid[None].astype(np.uint8))]),
            Case("PNG", [("image", "BYTES", np.array([png], dtype=object))]),
        ]
    if model == "tabular":
        return [Case("records", _records([example := _tabular_example(), _far(example)]))]
    raise AssertionError(f"{model}: no inputs to compare the runtimes on; add its cases here")


def _tabular_example() -> dict[str, float]:
    from tools.registry import get

    return get("tabular").example()


def _far(record: dict[str, float]) -> dict[str, float]:
    """The same record with one feature far outside the ranges training saw."""
    name = next(iter(record))
    return record | {name: record[name] * 30}


def _records(records: list[dict[str, float]]) -> list[tuple[str, str, np.ndarray]]:
    """One FP64 input per feature, one element per record (handlers/tabular/oip.py)."""
    return [(n, "FP64", np.array([r[n] for r in records], np.float64)) for n in records[0]]


REFUSALS: dict[str, list[tuple[str, str, np.ndarray]]] = {
    "sentiment": [("text", "BYTES", np.array([b"   "], dtype=object))],
    "frequency": [("signal", "FP32", np.array([], dtype=np.float32))],
    "digits": [("grid", "FP32", np.full((1, 8, 8), 99.0, np.float32))],
    "tabular": _records([_tabular_example()] * 257),  # one past model-config's max_records
}
"""One input each model refuses: both runtimes must give the same kind and reason."""


def settings_of(model: str, served) -> Any:
    from handlers.service import ModelService
    from tests.fixtures.served import handler_config

    return ModelService.from_dir(
        served.artifacts[model], name=model, config=handler_config(model)
    ).settings


def torchserve_answer(served, model: str, native: Any, request_id: str) -> tuple[int, Reply]:
    assert not native.parts, "a REST body carries no parts beside it"
    body = native.body if isinstance(native.body, bytes | str) else json.dumps(native.body)
    r = served.post(
        f"/predictions/{model}",
        data=body,
        headers={**native.headers, "X-Request-ID": request_id},
    )
    return r.status_code, Reply(r.content, r.headers.get("Content-Type", ""), dict(r.headers))


def oip_call(model: str, case_inputs, parameters: dict, transport: str, request_id: str) -> dict:
    return {
        "transport": transport,
        "binary": True,
        "model": model,
        "id": request_id,
        "parameters": parameters or None,
        "inputs": [{"name": n, "datatype": d, "array": pack(a)} for n, d, a in case_inputs],
    }


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal dtype, shape and bytes (a float equal only in value, or NaN vs NaN, is told apart)."""
    if a.dtype == object or b.dtype == object:
        return a.shape == b.shape and [bytes(x) for x in a.ravel()] == [bytes(x) for x in b.ravel()]
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def oip_outputs(result: dict) -> dict[str, np.ndarray]:
    assert result["error"] is None, result["error"]
    out = {}
    for name, packed in result["outputs"].items():
        array = unpack(packed)
        if array.dtype.kind == "U":  # BYTES come back as base64 text (oip_client)
            array = np.array([base64.b64decode(x) for x in array], dtype=object)
        out[name] = array
    return out


def test_every_registered_model_has_cases():
    assert set(REFUSALS) == set(registry.names())


@pytest.mark.parametrize("model", registry.names())
def test_oip_answers_equal_torchserves_to_the_bit(served, oip_server, model):
    from oip.contract import Contract

    assert model in served.models, f"the session's TorchServe does not serve {model}"
    settings = settings_of(model, served)
    contract = Contract(model, settings)
    for case in cases(model, settings):
        arrays = {n: a for n, _, a in case.inputs}
        native = wire.native(contract, arrays, case.parameters)
        status, reply = torchserve_answer(served, model, native, f"ts-{model}")
        assert status == 200, (case.name, reply.body[:500])
        want = {o.name: o.data for o in wire.answer(contract, reply, explained=False)}
        calls = [
            oip_call(model, case.inputs, case.parameters, t, f"oip-{model}-{t}")
            for t in ("http", "grpc")
        ]
        for call, result in zip(calls, oip_server.run(calls), strict=True):
            got = oip_outputs(result)
            where = (case.name, call["transport"])
            assert result["id"] == call["id"], where
            assert sorted(got) == sorted(want), where
            for name in want:
                assert same_bits(got[name], want[name]), (*where, name, got[name], want[name])
        if reply.content_type.startswith("application/json"):
            # Independently of the contract's reading: the JSON rows' numbers are the tensors'.
            rows = json.loads(reply.body)
            rows = rows if isinstance(rows, list) else [rows]
            got = oip_outputs(oip_server.run(calls[:1])[0])
            labels = list(rows[0]["probabilities"])
            probabilities = np.array([[r["probabilities"][k] for k in labels] for r in rows])
            assert same_bits(got["probabilities"], probabilities), case.name
            assert [x.decode() for x in got["label"]] == [r["label"] for r in rows]


@pytest.mark.parametrize("model", registry.names())
def test_a_refused_input_gets_the_same_kind_and_reason_from_both(served, oip_server, model):
    from oip.contract import Contract

    contract = Contract(model, settings_of(model, served))
    inputs = REFUSALS[model]
    native = wire.native(contract, {n: a for n, _, a in inputs}, {})
    status, reply = torchserve_answer(served, model, native, "refused-1")
    ts_body = json.loads(reply.body)
    assert status == 400, ts_body
    [grpc] = oip_server.run([oip_call(model, inputs, {}, "grpc", "refused-1")])
    # The catalogue's gRPC code for the kind at 400 (handlers/errors.KINDS): INVALID_ARGUMENT.
    code = KINDS[ts_body["kind"]].grpc_for(400)
    assert grpc["error"]["status"] == f"StatusCode.{code}", grpc
    oip_body = json.loads(grpc["error"]["message"])
    assert oip_body == ts_body == {**ts_body, "request_id": "refused-1"}
    # REST, as plain JSON: the protocol's error shape with the same body and status.
    rest = requests.post(
        f"{oip_server.url}/v2/models/{model}/infer",
        json={
            "id": "refused-1",
            "inputs": [
                {"name": n, "datatype": d, "shape": list(a.shape), "data": json_data(a)}
                for n, d, a in inputs
            ],
        },
        headers={"Authorization": f"Bearer {oip_server.token}"},
        timeout=60,
    )
    assert rest.status_code == status
    assert rest.json() == oip_body


def json_data(array: np.ndarray) -> list:
    if array.dtype == object:
        return [bytes(x).decode() for x in array.ravel()]
    return array.ravel().tolist()


@pytest.mark.parametrize("model", registry.names())
def test_the_rollout_judges_held_out_requests_are_answered_alike_over_the_oip(
    served, oip_server, model
):
    """`make rollout RUNTIME=oip` and `judge --runtime oip`: the judge's held-out bodies
    (deploy/rollout.py `judge_bodies`; for digits also encoded files, sent as binary data, and for
    sentiment several texts in one body), sent over the protocol as the model's tensors and read
    back into its JSON answers, are answered as TorchServe's REST answers the same bodies: the
    same labels and probabilities (classifiers), the same components (frequency), the same
    out-of-distribution flags; the judge finds nothing to tell the two apart."""
    from deploy import rollout
    from tools.registry import get

    bodies = rollout.judge_bodies(model, 6, seed=5)
    if model == "digits":
        png = base64.b64encode(get("digits").samples().binary_example()[0]).decode()
        bodies += [{"image": png}, {"images": [png, png]}]
    if model == "sentiment":  # several texts a body too, whatever the draw gave
        bodies.append({"texts": [t for b in bodies for t in b.get("texts", [b.get("text")])][:3]})
    token = served.keys["inference"]
    rest = [rollout.send(served.inference_url, model, b, token) for b in bodies]
    oip = [rollout.send(oip_server.url, model, b, oip_server.token, runtime="oip") for b in bodies]
    for body, r, o in zip(bodies, rest, oip, strict=True):
        assert r.status == o.status == 200, (str(body)[:200], r.body, o.body)
        for want, got in zip(rollout._answers(r.body), rollout._answers(o.body), strict=True):
            if model == "frequency":
                assert [c["frequency"] for c in got["components"]] == [
                    c["frequency"] for c in want["components"]
                ]
                for g, w in zip(got["components"], want["components"], strict=True):
                    np.testing.assert_allclose(g["signal"], w["signal"], atol=1e-6)
                    np.testing.assert_allclose(g["std"], w["std"], atol=1e-6)
                assert got["out_of_distribution"] == want["out_of_distribution"]
                continue
            assert got["label"] == want["label"]
            assert got["probabilities"] == list(want["probabilities"].values())
            if "out_of_distribution" in got:
                assert got["out_of_distribution"] == want["out_of_distribution"]
    limits = rollout.thresholds(model).model_copy(update={"min_requests": 1})
    verdict = rollout.analyse(limits, rest, oip)
    assert verdict.passed, verdict
    assert verdict.metrics.get("label_agreement", 1.0) == 1.0
    assert verdict.metrics.get("component_mad", 0.0) < 1e-6
