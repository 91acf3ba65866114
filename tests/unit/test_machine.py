"""Every timing names its CPU: model, class and the flags that decide speed, in training's and the
benchmark's reports alike (training/common/machine.py)."""

from __future__ import annotations

import json

import pytest

from bench.report import markdown_table
from training.common.machine import cpu_summary, describe_cpu
from training.common.tracking import numeric_metrics

BASE = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx fma avx2"


def cpuinfo(tmp_path, flags: str, model: str = "AMD EPYC"):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: {model}\nflags\t\t: {flags}\n\n")
    return path


@pytest.mark.parametrize(
    "extra, cls",
    [
        ("", "AVX2"),
        ("avx512f avx512bw", "AVX-512"),
        ("avx512f avx512_vnni", "AVX-512 VNNI"),
        ("avx512f avx512_vnni avx512_bf16", "AVX-512 BF16"),
        ("avx512f avx512_bf16 amx_tile amx_bf16 amx_int8", "AMX"),
    ],
)
def test_the_class_is_the_most_capable_set_of_speed_flags(tmp_path, monkeypatch, extra, cls):
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    cpu = describe_cpu(cpuinfo(tmp_path, f"{BASE} {extra}"))
    assert cpu["class"] == cls and cpu["model"] == "AMD EPYC"
    assert set(cpu["flags"]) <= set(f"{BASE} {extra}".split())
    assert "sse2" not in cpu["flags"]  # only the flags that decide speed are listed


def test_a_onednn_isa_cap_is_part_of_the_description(tmp_path, monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    cpu = describe_cpu(cpuinfo(tmp_path, f"{BASE} avx512f avx512_bf16"))
    assert cpu["isa_limit"] == "AVX2" and "capped at AVX2" in cpu["class"]


def test_this_machine_is_described():
    cpu = describe_cpu()
    assert cpu["model"] and cpu["class"] and cpu["cpus"] >= 1
    json.dumps(cpu)  # goes into metrics.json, manifest.json and bench.json


def test_the_machine_block_is_a_run_param_not_a_metric():
    metrics = {"test_accuracy": 0.9, "machine": {"cpus": 2, "flags": ["avx2"]}}
    assert numeric_metrics(metrics) == {"test_accuracy": 0.9}


def test_the_bench_report_names_the_cpu_class():
    cpu = {"model": "AMD EPYC", "class": "AVX2", "flags": ["avx2", "fma"], "cpus": 2}
    report = {
        "created": "2026-01-01T00:00:00Z",
        "machine": {"cpus": 2, "platform": "linux", "cpu": cpu},
        "versions": {"torch": "2", "onnxruntime": "1", "torchserve": "0.12"},
        "settings": {"artifacts": "a", "requests": 1, "protocols": ["rest"], "paced_fraction": 0.7},
        "results": [],
    }
    assert cpu_summary(cpu) in markdown_table(report)
    assert cpu_summary(cpu) == "AMD EPYC, AVX2 (avx2 fma), 2 CPUs"


def test_training_reports_name_the_cpu(sentiment_artifacts, frequency_artifacts):
    for artifacts in (sentiment_artifacts, frequency_artifacts):
        metrics = json.loads((artifacts / "metrics.json").read_text())
        manifest = json.loads((artifacts / "manifest.json").read_text())
        assert metrics["machine"] == manifest["metrics"]["machine"] == describe_cpu()
