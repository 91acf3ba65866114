"""The OIP adapter's batcher (oip/batcher.py) and tensor checks (oip/contract.py), without a
server: concurrent requests share batched calls, a full queue refuses at once, each request gets
its own answer, and bad tensors are refused with the model's error kinds."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from handlers.codec import Reply
from handlers.errors import BadField, EmptyInput, Overloaded, RequestError, TooLarge
from handlers.service import Request, wants_explanation
from oip import contract
from oip.batcher import Batcher


class Echo:
    """A stand-in lifecycle: answers each request with its own body, refuses "bad", records the
    batch sizes it was handed, and takes `delay` per batch (as a model's call would)."""

    def __init__(self, delay: float = 0.05):
        self.model = SimpleNamespace(name="echo")
        self.delay = delay
        self.sizes: list[int] = []
        self.gate = threading.Event()
        self.gate.set()

    def handle_batch(self, requests, write=None):
        self.gate.wait(5)
        self.sizes.append(len(requests))
        time.sleep(self.delay)
        return [
            EmptyInput("bad body") if r.body == b"bad" else Reply(r.body, "text/plain", {})
            for r in requests
        ]


def _run(coro):
    return asyncio.run(coro)


def test_concurrent_requests_share_batches_and_each_gets_its_own_answer():
    echo = Echo()
    batcher = Batcher([echo], batch_size=8, max_delay_s=0.02, queue_size=64)

    async def go():
        bodies = [b"bad" if i % 5 == 0 else str(i).encode() for i in range(24)]
        return bodies, await asyncio.gather(
            *(batcher.submit(Request(b, {}, str(i))) for i, b in enumerate(bodies))
        )

    bodies, answers = _run(go())
    batcher.stop()
    for body, answer in zip(bodies, answers, strict=True):
        if body == b"bad":
            assert isinstance(answer, EmptyInput)
        else:
            assert isinstance(answer, Reply) and answer.body == body
    assert max(echo.sizes) > 1, echo.sizes  # batched, not one call per request
    assert max(echo.sizes) <= 8 and sum(echo.sizes) == 24


def test_a_full_queue_refuses_at_once_with_overloaded():
    echo = Echo(delay=0.0)
    echo.gate.clear()  # the worker holds its first batch until released
    batcher = Batcher([echo], batch_size=1, max_delay_s=0.0, queue_size=2)

    async def go():
        first = asyncio.ensure_future(batcher.submit(Request(b"0", {})))
        await asyncio.sleep(0.2)  # the worker took it and waits on the gate
        waiting = [asyncio.ensure_future(batcher.submit(Request(b"w", {}))) for _ in range(2)]
        await asyncio.sleep(0.05)
        refused = await batcher.submit(Request(b"x", {}))
        echo.gate.set()
        return refused, await first, await asyncio.gather(*waiting)

    refused, first, waited = _run(go())
    batcher.stop()
    assert isinstance(refused, Overloaded) and refused.status == 503
    assert isinstance(first, Reply)
    assert all(isinstance(a, Reply) for a in waited)


class Item:
    """A kserve InferInput as the server reads it: JSON `data`, no binary `_raw_data`."""

    def __init__(self, name, datatype, shape, data):
        self.name, self.datatype, self.shape, self._data = name, datatype, shape, data
        self.data, self._raw_data = data, None

    def as_numpy(self):
        return np.asarray(self._data, dtype=object if self.datatype == "BYTES" else None).reshape(
            self.shape
        )


@pytest.fixture
def sentiment_contract():
    return contract.Contract(
        "sentiment",
        SimpleNamespace(export=SimpleNamespace(labels=("negative", "positive")), max_texts=16),
    )


def test_metadata_comes_from_the_models_contract_and_settings(sentiment_contract):
    # what the served model's metadata lists (oip/model.py get_input_types, get_output_types)
    inputs = [t.metadata() for t in sentiment_contract.inputs]
    assert inputs == [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    outputs = [t.metadata() for t in sentiment_contract.outputs]
    assert {"name": "probabilities", "datatype": "FP64", "shape": [-1, 2]} in outputs
    three = contract.Contract(
        "sentiment", SimpleNamespace(export=SimpleNamespace(labels=("a", "b", "c")))
    )
    assert {"name": "probabilities", "datatype": "FP64", "shape": [-1, 3]} in [
        t.metadata() for t in three.outputs
    ]


@pytest.mark.parametrize(
    ("items", "kind", "words"),
    [
        ([Item("nope", "BYTES", [1], [b"x"])], BadField, "unknown input 'nope'"),
        ([Item("text", "FP32", [1], [1.0])], BadField, "send BYTES"),
        ([Item("text", "BYTES", [1, 1], [[b"x"]])], BadField, "shape [1, 1]"),
        ([], BadField, "missing input 'text'"),
        ([Item("text", "BYTES", [1 << 23], [])], TooLarge, "elements"),
        ([Item("text", "BYTES", [3], [b"x"])], BadField, "holds 1 elements; its shape [3]"),
    ],
)
def test_bad_tensors_are_refused_with_the_models_error_kinds(
    sentiment_contract, items, kind, words
):
    with pytest.raises(RequestError) as caught:
        sentiment_contract.read_inputs(items)
    assert isinstance(caught.value, kind)
    assert words in caught.value.reason


def test_the_request_is_the_kits_typed_request_with_its_id_and_explain_flag(sentiment_contract):
    from handlers.kits.text.inputs import TextRequest

    arrays = {"text": np.array([b"x"], dtype=object)}
    request = sentiment_contract.request(arrays, {}, "id-1", explain=True)
    assert request.body is None and request.id == "id-1" and not request.parts
    assert request.typed == TextRequest(("x",), many=True)
    assert wants_explanation(request)
    assert not wants_explanation(sentiment_contract.request(arrays, {}, "id-2", explain=False))


def test_grpc_parameters_keep_doubles():
    class Param:
        def __init__(self, **kw):
            self.kw = kw

        def WhichOneof(self, _):
            return next(iter(self.kw))

        def __getattr__(self, name):
            return self.kw[name]

    got = contract.parameters_of(
        {"sample_rate": Param(double_param=1000.0), "stream": Param(bool_param=True)}
    )
    assert got == {"sample_rate": 1000.0, "stream": True}
