"""Every surface a client can reach, walked with generated requests (reliability/surface.py):
every route and method of TorchServe's own OpenAPI description, the headers TorchServe and the
handlers read, and every RPC of inference.proto, each sent at the same instant as valid requests
for the same model, so they share batches.

Invariants after every example, not expected answers per payload:
- no worker restarted (same worker ids and pids in the management API);
- cost: the generated request was answered within its model's responseTimeout, and no worker's
  RSS (its process tree) grew by more than RSS_BOUND over the run (bodies include the most
  expensive requests the limits allow, reliability/costly.py);
- the valid requests sent alongside got the answers they get alone;
- the generated request itself got a client error, a prediction, or a refusal with a JSON reason:
  never a 5xx other than our 501 (a mode not served) or 503 `overloaded`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import grpc
import psutil
import pytest
import requests
from google.protobuf import empty_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clients import stubs
from reliability import costly
from reliability.bodies import valid_example
from reliability.probes import worker_identity
from reliability.record import fuzz_examples, record
from reliability.surface import GrpcAttack, RestAttack, grpc_attacks, rest_attacks, rest_routes
from tools import registry

pytestmark = [pytest.mark.integration, pytest.mark.serial]

SERVICE = "/org.pytorch.serve.grpc.inference.InferenceAPIsService"
RSS_BOUND = 1 << 30
"""A worker's RSS may grow by at most this over its RSS when the suite starts (Captum's first
load included); the worst case allowed measures far less (docs/reliability.md)."""
NEIGHBOURS = 2
"""Valid requests sent with each generated one (the models batch up to 8)."""


def neighbour_body(model: str) -> bytes:
    # One-shot: a stream's state token would differ in its last bits with its batch's padding.
    return json.dumps({k: v for k, v in valid_example(model).items() if k != "stream"}).encode()


def rounded(value):
    """An answer with its floats at 5 decimals: the same answer within float noise."""
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


class Surface:
    def __init__(self, target):
        self.server = target.server
        self.models = target.models
        self.auth = self.server.auth()
        self.key = self.server.keys["management"]
        self.alone = {m: self.neighbour(m) for m in self.models}
        self.workers = self.identity()
        self.rss_start = {pid: worker_rss(pid) for ws in self.workers.values() for _, pid in ws}
        self.timeouts = {
            m: costly.model_config(m)["responseTimeout"] if m in registry.names() else 60
            for m in self.models
        }
        pb, _, _, _ = stubs.load()
        self.pb = pb
        self.channel = grpc.insecure_channel(self.server.grpc_target)

    def identity(self):
        return worker_identity(self.server.management_url, self.key, self.models)

    def neighbour(self, model: str) -> tuple[int, object]:
        r = requests.post(
            f"{self.server.inference_url}/predictions/{model}",
            data=neighbour_body(model),
            headers=self.auth | {"Content-Type": "application/json"},
            timeout=60,
        )
        return r.status_code, rounded(r.json()) if r.status_code == 200 else r.text

    def rest(self, attack: RestAttack) -> requests.Response:
        return requests.request(
            attack.method,
            self.server.inference_url + attack.path,
            data=attack.body.data,
            headers=self.auth | attack.request_headers(),
            timeout=60,
        )

    def grpc(self, attack: GrpcAttack) -> tuple[str, str]:
        md = [("authorization", f"Bearer {self.server.keys['inference']}")]
        if attack.method == "Ping":
            request = empty_pb2.Empty()
        else:
            request = self.pb.PredictionsRequest(
                model_name=attack.model_name,
                model_version=attack.model_version,
                input=dict(attack.inputs),
            )
        path = f"{SERVICE}/{attack.method}"
        out = request.SerializeToString()
        try:
            if attack.client_streaming:
                call = self.channel.stream_stream(path)
                list(call(iter([out] * attack.messages), metadata=md, timeout=20))
            elif attack.server_streaming:
                list(self.channel.unary_stream(path)(out, metadata=md, timeout=20))
            else:
                self.channel.unary_unary(path)(out, metadata=md, timeout=20)
        except grpc.RpcError as e:
            return e.code().name, e.details() or ""
        return "OK", ""

    def alongside(self, send, attack, model: str):
        """`attack` and NEIGHBOURS valid requests for `model`, at the same instant; the attack's
        answer within the model's responseTimeout."""
        started = time.monotonic()
        with ThreadPoolExecutor(1 + NEIGHBOURS) as pool:
            mine = pool.submit(send, attack)
            others = [pool.submit(self.neighbour, model) for _ in range(NEIGHBOURS)]
            answer = mine.result()
            seconds = time.monotonic() - started
            assert seconds < self.timeouts[model], f"{attack!r}: answered after {seconds:.1f} s"
            return answer, [f.result() for f in others]

    def check_invariants(self, model: str, neighbours: list, what: str) -> None:
        for answer in neighbours:
            assert answer == self.alone[model], f"{what}: a neighbour's answer changed: {answer}"
        now = self.identity()
        assert now == self.workers, f"{what}: workers changed {self.workers} -> {now}"
        for pid, start in self.rss_start.items():
            grown = worker_rss(pid) - start
            assert grown < RSS_BOUND, f"{what}: worker {pid} grew by {grown / 2**20:.0f} MB"


def worker_rss(pid: int) -> int:
    """RSS of a worker and its children (0 once it is gone: the identity check names that)."""
    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    except psutil.NoSuchProcess:
        return 0


def acceptable(r: requests.Response) -> bool:
    if r.status_code < 500:
        return True
    try:
        kind = r.json().get("kind")
    except ValueError:
        return False
    return (r.status_code, kind) in ((501, "not_implemented"), (503, "overloaded"))


def model_of(path: str, models: list[str]) -> str:
    return next((m for m in models if f"/{m}" in path), models[0])


SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def surface(fuzz_target):
    s = Surface(fuzz_target)
    yield s
    s.channel.close()


def test_every_rest_route_method_and_header_keeps_workers_and_neighbours(surface):
    openapi = requests.options(
        surface.server.inference_url + "/", headers=surface.auth, timeout=30
    ).json()
    routes = rest_routes(openapi, surface.models)
    assert any("/predictions/" in p for _, p in routes), "TorchServe's description lists no routes"
    seen: Counter = Counter()
    started = time.monotonic()

    @settings(max_examples=max(40, fuzz_examples() // 3), **SETTINGS)
    @given(attack=rest_attacks(routes, surface.models))
    def run(attack):
        model = model_of(attack.path, surface.models)
        r, neighbours = surface.alongside(surface.rest, attack, model)
        seen[
            (attack.method, attack.path.split("/")[1] if "/" in attack.path else "", r.status_code)
        ] += 1
        assert acceptable(r), f"{attack!r}: {r.status_code} {r.content[:200]!r}"
        surface.check_invariants(model, neighbours, repr(attack))

    held = False
    try:
        run()
        held = True
    finally:
        record(
            "surface-rest",
            invariants_held=held,
            routes=len(routes),
            inputs=sum(seen.values()),
            statuses={f"{m} /{p}: {s}": n for (m, p, s), n in sorted(seen.items())},
            seconds=round(time.monotonic() - started, 1),
        )


def test_every_grpc_rpc_keeps_workers_and_neighbours(surface):
    seen: Counter = Counter()
    started = time.monotonic()

    @settings(max_examples=max(20, fuzz_examples() // 6), **SETTINGS)
    @given(attack=grpc_attacks(surface.models), model=st.sampled_from(surface.models))
    def run(attack, model):
        model = attack.model_name if attack.model_name in surface.models else model
        (code, details), neighbours = surface.alongside(surface.grpc, attack, model)
        seen[(attack.method, code)] += 1
        assert code != "DEADLINE_EXCEEDED", f"{attack!r}: no answer in 20 s"
        # TorchServe says this when it dropped the worker's connection with its batch.
        assert "Worker died" not in details, f"{attack!r}: {code} {details}"
        surface.check_invariants(model, neighbours, repr(attack))

    held = False
    try:
        run()
        time.sleep(1)  # a worker killed after its answer is noticed a moment later
        assert surface.identity() == surface.workers, "workers changed during the gRPC run"
        held = True
    finally:
        record(
            "surface-grpc",
            invariants_held=held,
            inputs=sum(seen.values()),
            statuses={f"{m}: {c}": n for (m, c), n in sorted(seen.items())},
            seconds=round(time.monotonic() - started, 1),
        )
