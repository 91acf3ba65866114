"""The benchmark's report code: tables, summary ratios, the PNG, the Prometheus breakdown and the
CPU meter, on hand-made figures (the bench itself is `make bench`, not a test)."""

from __future__ import annotations

import os
import time

import pytest

from bench.cpu import CpuMeter
from bench.metrics import breakdown, parse
from bench.report import markdown_table, plot, summary
from tools.registry import get, names


def _level(c, rps, proto="rest"):
    return {
        "concurrency": c,
        "protocol": proto,
        "rps": rps,
        "p50_ms": 100.0,
        "p95_ms": 150.0,
        "p99_ms": 180.0,
        "mean_ms": 110.0,
        "errors": 0,
        "cpu": {"loadgen": 0.31, "frontend": 0.2, "workers": 1.4},
        "breakdown": {"frontend_latency_ms": 95.0, "queue_ms": 20.0, "mean_batch": 6.5},
    }


@pytest.fixture
def report():
    def result(runtime, ip, served):
        return {
            "model": "sentiment",
            "runtime": runtime,
            "in_process": {"batch_size": 8, "threads": 2, "rps": ip},
            "served": served,
            "paced": [
                {
                    "rate": 14.0,
                    "protocol": "rest",
                    "rps": 13.9,
                    "p50_ms": 90.0,
                    "p99_ms": 200.0,
                    "p99_over_p50": 2.22,
                    "errors": 0,
                }
            ],
            "stages": {"tokenize": 1.5, "runtime": 40.0, "head": 0.4, "json": 0.02},
        }

    return {
        "created": "2026-01-01T00:00:00Z",
        "machine": {"cpus": 2, "platform": "linux"},
        "versions": {"torch": "2.13.0", "onnxruntime": "1.32.0", "torchserve": "0.12.0"},
        "settings": {
            "artifacts": "artifacts",
            "requests": 64,
            "protocols": ["rest", "grpc"],
            "paced_fraction": 0.7,
        },
        "results": [
            result("onnx", 20.0, [_level(1, 10.0), _level(16, 18.0), _level(16, 19.0, "grpc")]),
            result("onnx-int8", 40.0, [_level(1, 20.0), _level(16, 36.0), _level(32, 30.0)]),
        ],
    }


def test_table_has_a_row_per_level_with_its_served_over_in_process_ratio(report):
    text = markdown_table(report)
    rows = [
        line
        for line in text.splitlines()
        if line.startswith("| sentiment | onnx | json | rest | 8 × 2")
    ]
    assert len(rows) == 2
    assert "| 0.50 |" in rows[0] and "| 0.90 |" in rows[1]
    assert "0.31 / 0.20 / 1.40" in rows[0]  # load generator / frontend / workers cores


def test_summary_gives_the_ratio_at_16_clients_and_int8_over_fp32(report):
    rows = {(s["runtime"], s["protocol"]): s for s in summary(report)}
    assert rows[("onnx", "rest")]["served_over_in_process"] == pytest.approx(0.9)
    assert rows[("onnx", "grpc")]["served_over_in_process"] == pytest.approx(0.95)
    assert rows[("onnx-int8", "rest")]["over_fp32"] == pytest.approx(36 / 18)
    assert rows[("onnx", "rest")]["over_fp32"] is None


def test_report_shows_open_loop_p99_over_p50_and_the_stage_breakdown(report):
    text = markdown_table(report)
    assert "| sentiment | onnx | json | rest | 14.0 | 13.9 | 90 | 200 | 2.22 | 0 |" in text
    assert "| sentiment | onnx-int8 | 1.50 | 40.00 | 0.40 | 0.020 |" in text


def test_plot_writes_a_png(report, tmp_path):
    path = plot(report, tmp_path / "bench.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


SCRAPE = """# HELP ts_inference_requests_total Total number of inference requests.
# TYPE ts_inference_requests_total counter
ts_inference_requests_total{model_name="sentiment_onnx",model_version="default",hostname="h"} %(req)s
ts_queue_latency_microseconds{model_name="sentiment_onnx",model_version="default",hostname="h"} %(queue)s
ts_inference_latency_microseconds{model_name="sentiment_onnx",model_version="default",hostname="h"} %(lat)s
ts_handler_batch_size_sum{ModelName="sentiment_onnx",Level="Model",Hostname="h"} %(req)s
ts_handler_batch_size_count{ModelName="sentiment_onnx",Level="Model",Hostname="h"} %(batches)s
ts_handler_stage_seconds_sum{Stage="inference",ModelName="sentiment_onnx",Level="Model",Hostname="h"} %(inf)s
ts_handler_stage_seconds_count{Stage="inference",ModelName="sentiment_onnx",Level="Model",Hostname="h"} %(batches)s
ts_handler_stage_seconds_sum{Stage="inference",ModelName="other",Level="Model",Hostname="h"} 99.0
"""


def test_breakdown_is_the_difference_between_two_scrapes_per_request_and_batch():
    before = parse(SCRAPE % {"req": 10, "queue": 1e5, "lat": 1e6, "batches": 2, "inf": 0.5})
    after = parse(SCRAPE % {"req": 50, "queue": 9e5, "lat": 5e6, "batches": 7, "inf": 2.0})
    got = breakdown(before, after, "sentiment_onnx", seconds=3.0)
    assert got["requests"] == 40 and got["batches"] == 5 and got["mean_batch"] == 8.0
    assert got["queue_ms"] == 20.0 and got["frontend_latency_ms"] == 100.0
    assert got["inference_ms_per_batch"] == 300.0 and got["preprocess_ms_per_batch"] is None
    assert got["inference_busy_share"] == 0.5  # 1.5 s of inference in 3 s of wall time


def test_cpu_meter_counts_the_load_generators_own_cpu():
    meter = CpuMeter(None)
    meter.start()
    spin = 0.5
    end = time.process_time() + spin  # CPU time, not wall: the cores are shared
    while time.process_time() < end:
        pass
    got = meter.stop()
    # psutil reads /proc in clock ticks: user and system are each truncated at both ends (< 2
    # ticks off in all), and the meter rounds cores to 3 decimals. Within that, nothing is lost.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert got["loadgen"] * got["seconds"] >= spin - 2 * tick - 0.0005 * got["seconds"]
    assert got["frontend"] == 0.0 and got["workers"] == 0.0


def test_set_overrides_reach_the_model_config_blocks():
    from bench.__main__ import parse_overrides
    from deploy.archive import apply_overrides

    got = parse_overrides(["maxBatchDelay=5", "handler.intra_op_spinning=true"])
    assert got == {"maxBatchDelay": 5, "handler.intra_op_spinning": True}
    config = apply_overrides({"maxBatchDelay": 20, "handler": {"threads": 2}}, got)
    assert config == {"maxBatchDelay": 5, "handler": {"threads": 2, "intra_op_spinning": True}}


def test_a_level_is_compared_with_the_in_process_figure_taken_next_to_it(report):
    level = report["results"][0]["served"][1]  # onnx rest, 16 clients, 18 req/s
    level["in_process_rps"] = 15.0  # the neighbours got busier since the first in-process run
    rows = {(s["runtime"], s["protocol"]): s for s in summary(report)}
    assert rows[("onnx", "rest")]["served_over_in_process"] == pytest.approx(18 / 15)
    line = next(x for x in markdown_table(report).splitlines() if "| 16 | 18.0 | 15.0 |" in x)
    assert "| 1.20 |" in line


def _frequency(body, workers, ip, handler_rps, served):
    return {
        "model": "frequency",
        "runtime": "onnx",
        "archive": "frequency_onnx",
        "body": body,
        "workers": workers,
        "in_process": {"batch_size": 8, "threads": 2, "rps": ip},
        "handler_in_process": {"body": body, "rps": handler_rps},
        "served": served,
        "paced": [],
    }


@pytest.fixture
def frequency_report(report):
    report["results"] = [
        _frequency("json", 1, 20.0, 16.0, [_level(1, 5.0), _level(16, 14.0), _level(16, 13.0, "grpc")]),
        _frequency("float32", 1, 20.0, 19.0, [_level(1, 8.0), _level(16, 18.0)]),
        _frequency("json", 2, 20.0, 16.0, [_level(16, 12.0)]),
    ]  # fmt: skip
    report["settings"]["signal_samples"] = 2000
    return report


def test_frequency_summary_is_per_body_kind_and_worker_count(frequency_report):
    rows = {(s["kind"], s["protocol"]): s for s in summary(frequency_report)}
    assert set(rows) == {
        ("json", "rest"),
        ("json", "grpc"),
        ("float32", "rest"),
        ("json ×2", "rest"),
    }
    assert rows[("json", "rest")]["served_over_in_process"] == pytest.approx(0.7)
    assert rows[("float32", "rest")]["served_over_in_process"] == pytest.approx(0.9)
    assert rows[("json ×2", "rest")]["served_over_in_process"] == pytest.approx(0.6)
    text = markdown_table(frequency_report)
    assert "| frequency | onnx | float32 | rest | 20.0 | 18.0 | 0.90 (16) | – |" in text
    assert "| frequency | onnx | json ×2 | rest | 8 × 2 | 16 | 12.0 |" in text


def test_handler_path_is_compared_with_the_bare_model_per_body_kind(frequency_report):
    text = markdown_table(frequency_report)
    section = text.split("| handler / bare |")[1].split("\n\n")[0]
    rows = [x for x in section.splitlines() if x.startswith("| frequency |")]
    # body | bare | handler | handler/bare | best served (any protocol, any workers) | served/handler
    assert "| frequency | onnx | json | 20.0 | 16.0 | 0.80 | 14.0 | 0.88 |" in rows
    assert "| frequency | onnx | float32 | 20.0 | 19.0 | 0.95 | 18.0 | 0.95 |" in rows
    assert len(rows) == 2  # one per body kind, not one per worker count


def test_float32_request_is_the_raw_signal_with_its_frequencies_in_a_header():
    import numpy as np

    from bench.served import float32_request

    raw, headers = float32_request({"signal": [0.5, -1.0, 2.0], "frequencies": [1.0, 3.0]})
    assert np.frombuffer(raw, "<f4").tolist() == [0.5, -1.0, 2.0]
    assert headers["X-Frequencies"] == "1,3"
    assert headers["Content-Type"] == headers["Accept"] == "application/octet-stream"


def test_replicas_time_one_bare_model_per_worker_and_add_them_up(frequency_artifacts):
    """With minWorkers > 1 TorchServe runs one process per worker: the bench's bare-model
    reference is as many processes, timed together, not one process's figure."""
    from bench.__main__ import bench_payloads
    from bench.inprocess import InProcess, Replicas

    payloads = bench_payloads("frequency", 4, {"signal_samples": 200})
    one = InProcess("frequency", frequency_artifacts, "onnx", payloads).time(0.3)
    two = Replicas(2, "frequency", frequency_artifacts, "onnx", payloads, None)
    try:
        both = two.time(0.3)
    finally:
        two.close()
    assert both["processes"] == 2 and one["requests"] > 0
    assert both["requests"] >= 2 * len(payloads)  # each process ran the whole set at least once
    assert len(both["rps_each"]) == 2 and min(both["rps_each"]) > 0
    assert both["rps"] == pytest.approx(sum(both["rps_each"]))
    assert all(not p.is_alive() for p in two.procs)


@pytest.mark.parametrize("model", names())
def test_every_registered_model_benches_in_process_through_its_own_hooks(model, request):
    """bench names no model: each one's tools/<model>/bench.py gives the bare runtime's feeds,
    and its optional `stages` / handler-path timing run through the registry."""
    from bench.__main__ import bench_payloads, model_bodies
    from bench.inprocess import InProcess, bench_parts, handler_throughput, stage_times

    parts = bench_parts(model)
    if parts is None:
        pytest.skip(f"{model} has no bench.py BENCH: bench skips it")
    artifacts = request.getfixturevalue(f"{model}_artifacts")
    payloads = bench_payloads(model, 4, {"signal_samples": 200})
    in_process = InProcess(model, artifacts, "onnx", payloads)
    bare = in_process.time(0.2)
    assert bare["requests"] >= len(payloads) and bare["rps"] > 0
    lone = in_process.lone_latency(0.1)  # one request alone: what a lone client is held against
    assert lone["calls"] >= 8 and 0 < lone["p50_ms"] <= lone["p95_ms"]
    stages = stage_times(model, artifacts, "onnx", payloads, min_seconds=0.1)
    assert (stages is None) == (parts.stages is None)
    if stages is None and get(model).samples().bench_bodies:
        for body in model_bodies(model, ["json", "float32"]):
            h = handler_throughput(model, artifacts, "onnx", payloads, body, 0.2)
            assert h["requests"] >= len(payloads) and h["rps"] > 0


def test_a_variant_is_served_beside_the_model_config_and_the_lone_client_tax_is_reported():
    from bench.__main__ import parse_args, parse_variants, variant_suffix
    from bench.report import lone_clients

    args = parse_args(["--variant", "maxBatchDelay=20", "--variant", "maxBatchDelay=5,batchSize=4"])
    assert parse_variants(args.variant) == [
        ("maxBatchDelay=20", {"maxBatchDelay": 20}),
        ("maxBatchDelay=5,batchSize=4", {"maxBatchDelay": 5, "batchSize": 4}),
    ]
    assert variant_suffix("maxBatchDelay=20") == "maxBatchDelay20"  # a valid archive name

    def row(variant, p50_one, rps16, queue):
        one = _level(1, 9.0) | {"p50_ms": p50_one}
        one["breakdown"] = one["breakdown"] | {"queue_ms": queue}
        return {
            "model": "frequency",
            "runtime": "onnx",
            "body": "json",
            "workers": 1,
            "variant": variant,
            "in_process": {"batch_size": 8, "threads": 2, "rps": 30.0},
            "lone_in_process": {"p50_ms": 34.0, "p95_ms": 36.0, "calls": 50},
            "served": [one, _level(16, rps16)],
            "paced": [],
        }

    report = {"results": [row(None, 40.0, 20.0, 1.2), row("maxBatchDelay=20", 60.0, 19.0, 20.3)]}
    got = {r["variant"]: r for r in lone_clients(report)}
    assert got[None]["tax_ms"] == pytest.approx(6.0) and got[None]["rps16_over_config"] == 1.0
    assert got["maxBatchDelay=20"]["tax_ms"] == pytest.approx(26.0)
    assert got["maxBatchDelay=20"]["rps16_over_config"] == pytest.approx(0.95)
    assert got["maxBatchDelay=20"]["kind"] == "json [maxBatchDelay=20]"


def test_a_variant_with_other_workers_is_held_against_the_model_configs_own_row():
    """`--variant minWorkers=2,...` serves another worker count: its 16-client throughput is held
    against the model-config's row (one worker), not left blank for want of a two-worker one."""
    from bench.report import lone_clients

    def row(variant, workers, rps16):
        return {
            "model": "frequency",
            "runtime": "onnx",
            "body": "float32",
            "workers": workers,
            "variant": variant,
            "in_process": {"batch_size": 8, "threads": 2, "rps": 70.0},
            "lone_in_process": {"p50_ms": 13.0, "p95_ms": 14.0, "calls": 50},
            "served": [_level(1, 45.0), _level(16, rps16)],
            "paced": [],
        }

    report = {"results": [row(None, 1, 60.0), row("minWorkers=2,maxWorkers=2", 2, 63.0)]}
    got = {r["variant"]: r for r in lone_clients(report)}
    assert got["minWorkers=2,maxWorkers=2"]["rps16_over_config"] == pytest.approx(1.05)
    assert got[None]["rps16_over_config"] == 1.0


def test_ceiling_is_what_the_cores_left_to_the_workers_serve_at_their_cost_per_request(report):
    from bench.report import ceilings

    rows = {(x["runtime"], x["protocol"]): x for x in ceilings(report)}
    fp32 = rows[("onnx", "rest")]  # 16 clients: 18 req/s, workers 1.4 cores, 0.31 + 0.2 elsewhere
    assert fp32["clients"] == 16
    assert fp32["worker_core_ms"] == pytest.approx(1.4 / 18.0 * 1e3)
    assert fp32["cores_left"] == pytest.approx(2 - 0.31 - 0.2)
    assert fp32["idle_cores"] == pytest.approx(2 - 0.31 - 0.2 - 1.4)
    assert fp32["ceiling_rps"] == pytest.approx((2 - 0.51) / (1.4 / 18.0))
    assert fp32["ceiling_over_bare"] == pytest.approx((2 - 0.51) / (1.4 / 18.0) / 20.0)
    assert fp32["served_over_ceiling"] == pytest.approx(18.0 / ((2 - 0.51) / (1.4 / 18.0)))
    assert rows[("onnx-int8", "rest")]["clients"] == 16  # read where the ratio is, not at 32
    table = markdown_table(report)
    assert (
        "| sentiment | onnx | json | rest | 16 | 77.8 | 1.49 | 0.09 | 19.2 | 0.96 | 0.94 |" in table
    )


def test_ceiling_takes_the_cores_this_process_may_run_on_and_skips_levels_without_cpu_figures(
    report,
):
    from bench.report import ceilings

    report["machine"]["cpu"] = {"cpus": 4}  # affinity: what a cpuset gives, not os.cpu_count()
    assert ceilings(report)[0]["cores_left"] == pytest.approx(4 - 0.51)
    for r in report["results"]:
        for level in r["served"]:
            level["cpu"] = {"loadgen": None, "frontend": 0.2, "workers": 1.4}
    assert ceilings(report) == []
    assert "ceiling req/s" not in markdown_table(report)


def test_the_report_shows_torchserve_and_oip_side_by_side_with_the_cpu(report):
    assert "Open Inference Protocol" not in markdown_table(report)
    report["oip"] = {
        "cpu_summary": "AMD EPYC (AVX-512 BF16 class)",
        "load_average_1m": 1.5,
        "clients": 16,
        "seconds": 20.0,
        "interleaved_lone_p50_ms": {"torchserve": 52.7, "oip": 55.3},
        "lone_extra_ms": 2.6,
        "best_answered_per_s": {"torchserve": 16.37, "oip": 15.1},
        "oip_over_torchserve_throughput": 0.922,
    }
    table = markdown_table(report)
    section = table[table.index("## TorchServe and the Open Inference Protocol server") :]
    assert "AMD EPYC (AVX-512 BF16 class)" in section
    assert "| 16 clients (answered/s) | 16.37 | 15.10 | 0.922 |" in section
    assert "| lone client p50, interleaved (ms) | 52.7 | 55.3 | +2.6 ms |" in section


def test_the_noop_ceiling_section_carries_both_rates_their_ratio_and_the_cpu(report):
    """bench/ceiling.py: per body and protocol, the model's served rate beside the no-op's (the
    frontend's ceiling for the same sizes), best of the rounds, their ratio, the CPU named; a
    ceiling row whose calls failed fails the bench."""
    from bench import ceiling

    rates = {("frequency_onnx", "json"): [80.0, 90.0], ("noop_frequency_onnx", "json"): [100.0, 95.0],
             ("frequency_onnx", "float32"): [150.0, 140.0],
             ("noop_frequency_onnx", "float32"): [160.0, 150.0]}  # fmt: skip
    calls = []

    def load(archive, payloads, clients, proto, body, codec):
        calls.append((archive, proto, body, codec))
        rps = rates[(archive, body)][sum(1 for c in calls if c[0] == archive and c[2] == body) - 1]
        return {"rps": rps, "p50_ms": 1000 * clients / rps, "errors": 0, "refused": 0}

    kinds = [("json", "rest"), ("float32", "rest")]
    section = ceiling.measure(load, "frequency", "frequency_onnx", "noop_frequency_onnx",
                              [{}] * 64, 16, kinds, rounds=2)  # fmt: skip
    assert {c[3] for c in calls} == {"frequency"}  # the no-op's bodies are written by the model's
    assert len(calls) == 8 and section["cpu_summary"] and section["clients"] == 16
    json_row, f32_row = section["rows"]
    assert (json_row["model_rps"], json_row["noop_rps"], json_row["ratio"]) == (90.0, 100.0, 0.9)
    assert (f32_row["body"], f32_row["ratio"]) == ("float32", round(150 / 160, 3))
    report["noop_ceiling"] = [section]
    table = markdown_table(report)
    part = table[table.index("## The serving ceiling") :]
    assert section["cpu_summary"] in part
    assert "| json | REST | 90.0 | 100.0 | 0.90 |" in part
    assert "| float32 | REST | 150.0 | 160.0 | 0.94 |" in part
    assert ceiling.failures([section]) == []
    json_row["errors"] = 2
    assert ceiling.failures([section]) == ["ceiling frequency_onnx json rest: 2 calls failed"]


def test_the_noop_archive_answers_the_models_own_answers_with_its_model_config(
    frequency_artifacts, tmp_path
):
    import json
    import zipfile

    from bench import ceiling
    from bench.__main__ import bench_payloads
    from deploy.archive import build_archive

    like = build_archive("frequency", frequency_artifacts, tmp_path / "store", runtime="onnx",
                         name="frequency_onnx", build_dir=tmp_path / "build")  # fmt: skip
    service = ceiling.in_process_service("frequency", frequency_artifacts, "onnx")
    payload = bench_payloads("frequency", 1, {"signal_samples": 300})[0]
    prebuilt = ceiling.answers(service, payload, "frequency")
    assert len(json.loads(prebuilt["json"][0])["components"]) == len(payload["frequencies"] or [1])
    assert prebuilt["float32"][1]["X-Shape"].startswith("2,")
    mar = ceiling.build_noop(tmp_path / "store", "noop", like, prebuilt, tmp_path / "work")
    with zipfile.ZipFile(mar) as z:
        assert z.read("answer.json") == prebuilt["json"][0]
        assert z.read("answer.f32") == prebuilt["float32"][0]
        assert json.loads(z.read("answer.headers.json")) == prebuilt["float32"][1]
        assert "noop_handler.py" in z.namelist()
    assert ceiling.model_config(mar) == ceiling.model_config(like)
