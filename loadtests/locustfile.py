"""Locust users for both protocols over the served models, load shapes and an SLO gate.

    make loadtest                                   # headless, reports in reports/
    locust -f loadtests/locustfile.py --headless --shape spike --slo-p95-ms 1500 \
        --csv reports/loadtest --html reports/loadtest.html

Options (each also an environment variable): --ts-config / LOADTEST_TS_CONFIG (addresses),
--key-file / LOADTEST_KEY_FILE (default: key_file.json next to the config), --models /
LOADTEST_MODELS ("a:3,b:1": model:task weight; default every registered model at its
LOAD_WEIGHT), --shape / LOADTEST_SHAPE
(steady|spike), --peak-users, --duration-s, --ramp-s, --spike-users, --spike-at-s, --spike-s,
--slo-p95-ms / LOADTEST_SLO_P95_MS, --slo-max-failures, --slo-report (JSON verdict).
Each request fires a Locust request event with request_type REST or GRPC and the model as name.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # locust puts only this folder on sys.path
    sys.path.insert(0, str(ROOT))

import grpc.experimental.gevent as grpc_gevent  # noqa: E402
from locust import LoadTestShape, User, between, events  # noqa: E402

from clients.client import connect  # noqa: E402
from clients.errors import ClientError  # noqa: E402
from clients.settings import ClientSettings  # noqa: E402
from loadtests.payloads import Payloads, parse_weights  # noqa: E402
from loadtests.shapes import SHAPES, ShapeSettings, Tick  # noqa: E402
from loadtests.slo import SloBounds, judge, write_verdict  # noqa: E402

# grpc's C core must yield to gevent, or one gRPC user blocks every other greenlet.
grpc_gevent.init_gevent()


@events.init_command_line_parser.add_listener
def _options(parser) -> None:
    g = parser.add_argument_group("torchserve load test")
    g.add_argument(
        "--ts-config", default=str(ROOT / "config.properties"), env_var="LOADTEST_TS_CONFIG"
    )
    g.add_argument("--key-file", default="", env_var="LOADTEST_KEY_FILE")
    g.add_argument("--models", default="", env_var="LOADTEST_MODELS")
    g.add_argument(
        "--shape", choices=("steady", "spike"), default="steady", env_var="LOADTEST_SHAPE"
    )
    g.add_argument("--peak-users", type=int, default=8, env_var="LOADTEST_USERS")
    g.add_argument("--duration-s", type=float, default=60.0, env_var="LOADTEST_DURATION_S")
    g.add_argument("--ramp-s", type=float, default=10.0, env_var="LOADTEST_RAMP_S")
    g.add_argument("--spike-users", type=int, default=32, env_var="LOADTEST_SPIKE_USERS")
    g.add_argument("--spike-at-s", type=float, default=20.0, env_var="LOADTEST_SPIKE_AT_S")
    g.add_argument("--spike-s", type=float, default=10.0, env_var="LOADTEST_SPIKE_S")
    g.add_argument("--slo-p95-ms", type=float, default=2000.0, env_var="LOADTEST_SLO_P95_MS")
    g.add_argument("--slo-max-failures", type=int, default=0, env_var="LOADTEST_SLO_MAX_FAILURES")
    g.add_argument(
        "--slo-report",
        default=str(ROOT / "reports" / "loadtest_slo.json"),
        env_var="LOADTEST_SLO_REPORT",
    )


class ModelUser(User):
    """Calls the served models with realistic payloads, through the client of `protocol`."""

    abstract = True
    protocol = "rest"
    wait_time = between(0.05, 0.3)

    def on_start(self) -> None:
        opts = self.environment.parsed_options
        settings = ClientSettings.from_properties(
            opts.ts_config, key_file=opts.key_file or None, timeout=30
        )
        self.client = connect(self.protocol, settings)
        self.payloads = Payloads(seed=id(self) % 10_000)
        self.weights = parse_weights(opts.models)
        self.models = list(self.weights)

    def on_stop(self) -> None:
        self.client.close()

    def call_model(self) -> None:
        model = self.payloads.rng.choices(
            self.models, weights=[self.weights[m] for m in self.models]
        )[0]
        payload = self.payloads.for_model(model)
        start = time.perf_counter()
        error, length = None, 0
        try:
            answer = self.client.predict(model, payload)
            length = len(str(answer))
        except ClientError as e:
            error = e
        self.environment.events.request.fire(
            request_type=self.protocol.upper(),
            name=model,
            response_time=(time.perf_counter() - start) * 1000,
            response_length=length,
            exception=error,
            context={"protocol": self.protocol},
        )

    tasks = [call_model]


class RestUser(ModelUser):
    protocol = "rest"


class GrpcUser(ModelUser):
    protocol = "grpc"


class ConfiguredShape(LoadTestShape):
    """The shape named by --shape, with its settings from the command line / environment."""

    def tick(self) -> Tick:
        options = self.runner.environment.parsed_options
        return SHAPES[options.shape](self.get_run_time(), ShapeSettings.from_options(options))


@events.quitting.add_listener
def _slo_gate(environment, **_kw) -> None:
    opts = environment.parsed_options
    stats = environment.stats
    by_protocol: dict[str, int] = {}
    for (_name, method), entry in stats.entries.items():
        by_protocol[method] = by_protocol.get(method, 0) + entry.num_requests
    verdict = judge(
        stats.total.num_requests,
        stats.total.num_failures,
        stats.total.get_response_time_percentile(0.95),
        by_protocol,
        SloBounds(p95_ms=opts.slo_p95_ms, max_failures=opts.slo_max_failures),
    )
    if opts.slo_report:
        write_verdict(verdict, opts.slo_report)
    summary = f"SLO {'passed' if verdict.passed else 'FAILED'}: {verdict.requests} requests, {verdict.failures} failures, p95 {verdict.p95_ms:.0f} ms, by protocol {verdict.by_protocol}"
    print(summary + "".join(f"\n  - {v}" for v in verdict.violations), file=sys.stderr)
    if not verdict.passed:
        environment.process_exit_code = 1
