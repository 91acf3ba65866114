"""The benchmark report as a markdown table (one row per model × runtime × concurrency)."""

from __future__ import annotations


def markdown_table(report: dict) -> str:
    s = report["settings"]
    lines = [
        f"# Serving benchmark ({report['created']})",
        "",
        f"{report['machine']['cpus']} CPUs, {report['machine']['platform']}; "
        f"torch {report['versions']['torch']}, onnxruntime {report['versions']['onnxruntime']}, "
        f"torchserve {report['versions']['torchserve']}; artifacts `{s['artifacts']}`; "
        f"{s['requests']} requests per level over {s['protocol'].upper()} (float32 rows: REST); "
        f"load average at the end {report['machine'].get('load_average_1m', float('nan')):.1f}.",
        "",
        "| model | runtime | body | workers | batch × threads | in-process req/s | concurrency | served req/s | p50 ms | p95 ms | p99 ms | errors | served / in-process |",
        "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:
        ip = row["in_process"]
        for s in row["served"]:
            ratio = s["rps"] / ip["rps"] if ip["rps"] else float("nan")
            lines.append(
                f"| {row['model']} | {row['runtime']} | {row.get('body', 'json')} | {row.get('workers', '')} "
                f"| {ip['batch_size']} × {ip['threads']} | {ip['rps']:.1f} "
                f"| {s['concurrency']} | {s['rps']:.1f} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['p99_ms']:.1f} "
                f"| {s['errors']} | {ratio:.2f} |"
            )
    lines += stage_table(report)
    lines += [
        "",
        "In-process: the mean of runs before and after the served levels (drift on a shared machine);",
        "the bare exported model through handlers/runtime.py, inputs prepared by the handler's",
        "own tokenizer/windowing outside the clock, batches of the served batchSize. Served: the whole path",
        "(client, HTTP/gRPC, TorchServe frontend, batching, handler pre/post-processing, MC-dropout head).",
        "",
    ]
    return "\n".join(lines)


def _ms(value) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "–"


def stage_table(report: dict) -> list[str]:
    """Where the served time went, per level: handler stages (ms per request and the share of
    the wall time a worker spent in each) and the frontend's queue time per request."""
    rows = [(row, s) for row in report["results"] for s in row["served"] if s.get("stages")]
    if not rows:
        return []
    lines = [
        "",
        "Where the time went (TorchServe's stage metrics over each level; ms per request, and in",
        "brackets the share of the wall time the workers spent in the stage):",
        "",
        "| model | runtime | body | workers | concurrency | batch (mean) | preprocess | inference | postprocess | queue | frontend inference |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row, s in rows:
        st = s["stages"]
        batches = st["inference"]["batches"]
        mean_batch = s["requests"] / batches if batches else None
        cells = [
            f"{_ms(st[k]['ms_per_request'])} ({st[k]['busy_share']:.0%})"
            if st[k].get("busy_share") is not None
            else _ms(st[k]["ms_per_request"])
            for k in ("preprocess", "inference", "postprocess")
        ]
        lines.append(
            f"| {row['model']} | {row['runtime']} | {row.get('body', 'json')} | {row.get('workers', '')} "
            f"| {s['concurrency']} | {_ms(mean_batch)} | {' | '.join(cells)} "
            f"| {_ms(st['queue']['ms_per_request'])} | {_ms(st['frontend_inference']['ms_per_request'])} |"
        )
    return lines
