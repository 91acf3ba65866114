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
