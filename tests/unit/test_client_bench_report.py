"""The benchmark's markdown table: one row per served level, ratio against in-process."""

from __future__ import annotations

from bench.report import markdown_table


def test_table_has_a_row_per_concurrency_with_the_served_over_in_process_ratio():
    report = {
        "created": "2026-01-01T00:00:00Z",
        "machine": {"cpus": 2, "platform": "linux"},
        "versions": {"torch": "2.13.0", "onnxruntime": "1.32.0", "torchserve": "0.12.0"},
        "settings": {"artifacts": "artifacts", "requests": 8, "protocol": "rest"},
        "results": [
            {
                "model": "sentiment",
                "runtime": "onnx",
                "in_process": {"batch_size": 8, "threads": 2, "rps": 100.0},
                "served": [
                    {
                        "concurrency": c,
                        "rps": rps,
                        "p50_ms": 1.0,
                        "p95_ms": 2.0,
                        "p99_ms": 3.0,
                        "errors": 0,
                    }
                    for c, rps in ((1, 25.0), (4, 50.0))
                ],
            }
        ],
    }
    rows = [line for line in markdown_table(report).splitlines() if line.startswith("| sentiment")]
    assert len(rows) == 2
    assert rows[0].rstrip(" |").endswith("0.25") and rows[1].rstrip(" |").endswith("0.50")
    assert "| 8 × 2 |" in rows[0]


def test_stage_breakdown_is_the_difference_of_two_metric_scrapes():
    from bench.report import stage_table
    from bench.stages import breakdown, parse_metrics

    def text(pre_sum, inf_sum, count, queue_us):
        return "\n".join(
            [
                "# HELP ts_handler_stage_seconds x",
                f'ts_handler_stage_seconds_sum{{Stage="preprocess",ModelName="m",Level="Model",}} {pre_sum}',
                f'ts_handler_stage_seconds_count{{Stage="preprocess",ModelName="m",Level="Model",}} {count}',
                f'ts_handler_stage_seconds_sum{{Stage="inference",ModelName="m",Level="Model",}} {inf_sum}',
                f'ts_handler_stage_seconds_count{{Stage="inference",ModelName="m",Level="Model",}} {count}',
                'ts_handler_stage_seconds_sum{Stage="inference",ModelName="other",Level="Model",} 99.0',
                f'ts_queue_latency_microseconds{{model_name="m",model_version="default",hostname="h",}} {queue_us}',
            ]
        )

    before = parse_metrics(text(1.0, 10.0, 5, 1000.0))
    after = parse_metrics(text(1.5, 14.0, 15, 41000.0))
    st = breakdown(before, after, "m", seconds=8.0, requests_=20)
    assert st["inference"]["batches"] == 10
    assert st["inference"]["ms_per_batch"] == 400.0 and st["inference"]["ms_per_request"] == 200.0
    assert st["inference"]["busy_share"] == 0.5 and st["preprocess"]["ms_per_request"] == 25.0
    assert st["queue"]["ms_per_request"] == 2.0 and st["postprocess"]["batches"] == 0
    report = {"results": [{"model": "m", "runtime": "onnx", "served": [
        {"concurrency": 4, "requests": 20, "stages": st}
    ]}]}  # fmt: skip
    row = [line for line in stage_table(report) if line.startswith("| m |")]
    assert row and "| 2.0 |" in row[0] and "200.0 (50%)" in row[0]
