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
        f"{s['requests']} requests per level over {s['protocol'].upper()}.",
        "",
        "| model | runtime | batch × threads | in-process req/s | concurrency | served req/s | p50 ms | p95 ms | p99 ms | errors | served / in-process |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:
        ip = row["in_process"]
        for s in row["served"]:
            ratio = s["rps"] / ip["rps"] if ip["rps"] else float("nan")
            lines.append(
                f"| {row['model']} | {row['runtime']} | {ip['batch_size']} × {ip['threads']} | {ip['rps']:.1f} "
                f"| {s['concurrency']} | {s['rps']:.1f} | {s['p50_ms']:.1f} | {s['p95_ms']:.1f} | {s['p99_ms']:.1f} "
                f"| {s['errors']} | {ratio:.2f} |"
            )
    lines += [
        "",
        "In-process: the bare exported model through handlers/runtime.py, inputs prepared by the handler's",
        "own tokenizer/windowing outside the clock, batches of the served batchSize. Served: the whole path",
        "(client, HTTP/gRPC, TorchServe frontend, batching, handler pre/post-processing, MC-dropout head).",
        "",
    ]
    return "\n".join(lines)
