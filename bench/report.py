"""The benchmark report: markdown tables (served levels, open-loop p99/p50, where the time goes,
a model's handler path against the bare model per body kind) and a PNG of throughput and p99
against concurrency, one line per runtime × body × protocol."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from training.common.machine import cpu_summary


def _f(x, fmt: str = ".1f") -> str:
    return "–" if x is None else format(x, fmt)


def _kind(row: dict) -> str:
    """Body kind, worker count and variant of a row: `json`, `float32`, `json ×2` (workers beyond
    one), `json [maxBatchDelay=20]` (served with a --variant's settings)."""
    body, workers = row.get("body", "json"), row.get("workers", 1)
    kind = body if workers == 1 else f"{body} ×{workers}"
    return kind if not row.get("variant") else f"{kind} [{row['variant']}]"


def served_rows(report: dict) -> list[dict]:
    """Flat rows: one per model × runtime × protocol × concurrency, with the served/in-process ratio."""
    rows = []
    for r in report["results"]:
        for s in r["served"]:
            ip = _bare(r, s)
            rows.append(
                {
                    "model": r["model"],
                    "runtime": r["runtime"],
                    "body": r.get("body", "json"),
                    "workers": r.get("workers", 1),
                    "in_process_rps": ip,
                    **s,
                }
                | {"ratio": s["rps"] / ip}
            )
    return rows


def _bare(row: dict, level: dict) -> float:
    """The in-process figure taken next to this level, else the one from before the server."""
    return level.get("in_process_rps") or row["in_process"]["rps"]


def _ratio_levels(row: dict) -> Iterator[tuple[str, dict]]:
    """Per protocol of a row, the level its served / in-process ratio is read at: 16 clients (the
    issues' goal), else the highest level run."""
    for proto in sorted({s["protocol"] for s in row["served"]}):
        levels = [s for s in row["served"] if s["protocol"] == proto]
        yield proto, next((s for s in levels if s["concurrency"] == 16), levels[-1])


def summary(report: dict) -> list[dict]:
    """Per model × runtime × body × workers × protocol: best served throughput, served/in-process
    at 16 clients (the issues' goal, else the highest level run) and the speed-up over fp32 of the
    same body, workers and protocol."""
    out = []
    for r in report["results"]:
        for proto, at in _ratio_levels(r):
            ip = _bare(r, at)
            out.append(
                {
                    "model": r["model"],
                    "runtime": r["runtime"],
                    "body": r.get("body", "json"),
                    "workers": r.get("workers", 1),
                    "kind": _kind(r),
                    "protocol": proto,
                    "in_process_rps": ip,
                    "best_rps": max(s["rps"] for s in r["served"] if s["protocol"] == proto),
                    "ratio_concurrency": at["concurrency"],
                    "served_over_in_process": at["rps"] / ip if ip else None,
                }
            )

    def same(s: dict) -> tuple:
        return (s["model"], s["kind"], s["protocol"])

    fp32 = {same(s): s["best_rps"] for s in out if s["runtime"] == "onnx"}
    for s in out:
        base = fp32.get(same(s))
        s["over_fp32"] = s["best_rps"] / base if base and s["runtime"] != "onnx" else None
    return out


def failures(report: dict) -> list[str]:
    """Why the benchmark failed, one line per level that did: calls that ended in an error (a 4xx,
    a 5xx other than an overloaded refusal, no answer), or a level where nothing was answered at
    all. Refusals as overloaded (503 `overloaded`, a full queue) are the bounded queue working at
    a level above what the server takes at once: counted and reported, never a failure."""
    out = []
    for r in report["results"]:
        levels = [(f"x{s['concurrency']}", s) for s in r["served"]]
        levels += [(f"paced {p['rate']:.1f}/s", p) for p in r.get("paced", [])]
        for name, s in levels:
            where = f"{r['model']} {r['runtime']} {_kind(r)} {s['protocol']} {name}"
            if s["errors"]:
                out.append(f"{where}: {s['errors']} of {s.get('requests', '?')} calls failed")
            elif not s["rps"] > 0:
                out.append(f"{where}: no call was answered ({s.get('refused', 0)} refused)")
    return out


def markdown_table(report: dict) -> str:
    s = report["settings"]
    m, v = report["machine"], report["versions"]
    lines = [
        f"# Serving benchmark ({report['created']})",
        "",
        f"CPU: {cpu_summary(m['cpu']) if m.get('cpu') else 'not recorded'}; "
        f"{m['cpus']} CPUs, {m['platform']}; torch {v['torch']}, onnxruntime {v['onnxruntime']}, "
        f"torchserve {v['torchserve']}; artifacts `{s['artifacts']}`; at least {s['requests']} "
        f"requests per level (4 per client), one text or one {s.get('signal_samples', 2000)}-sample "
        f"signal (all four frequencies) per request, protocols "
        f"{', '.join(p.upper() for p in s['protocols'])} (float32 bodies: REST); load average "
        f"{_f(m.get('load_average_1m'))} at the end. Body column: the body kind "
        f"(JSON, or float32 for a model that takes it), ×N when N workers served it.",
        "",
        "## Summary",
        "",
        "| model | runtime | body | protocol | in-process req/s (at clients) | best served req/s | served / in-process (at clients) | × fp32 |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for x in summary(report):
        lines.append(
            f"| {x['model']} | {x['runtime']} | {x['kind']} | {x['protocol']} | {x['in_process_rps']:.1f} "
            f"| {x['best_rps']:.1f} | {_f(x['served_over_in_process'], '.2f')} ({x['ratio_concurrency']}) "
            f"| {_f(x['over_fp32'], '.2f')} |"
        )
    lines += [
        "",
        "## Closed loop: N clients, each sends its next request when the last one is answered",
        "",
        "Refused: answered 503 as overloaded (a full queue or a work budget: the bounded queue doing",
        "its work at a level above what the server takes at once); errors: every other failure. Only",
        "errors, or a level with no answer at all, fail the run (exit status 1).",
        "",
        "| model | runtime | body | protocol | batch × threads | clients | served req/s | in-process req/s | p50 ms | p95 ms | p99 ms | refused | errors | served / in-process | CPU cores: load gen / frontend / workers | mean batch |",
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in report["results"]:
        ip = r["in_process"]
        for x in r["served"]:
            cpu = x.get("cpu") or {}
            br = x.get("breakdown") or {}
            ratio = x["rps"] / _bare(r, x)
            lines.append(
                f"| {r['model']} | {r['runtime']} | {_kind(r)} | {x['protocol']} | {ip['batch_size']} × {ip['threads']} "
                f"| {x['concurrency']} | {x['rps']:.1f} | {_bare(r, x):.1f} | {x['p50_ms']:.0f} | {x['p95_ms']:.0f} | {x['p99_ms']:.0f} "
                f"| {x.get('refused', 0)} | {x['errors']} | {_f(ratio, '.2f')} "
                f"| {_f(cpu.get('loadgen'), '.2f')} / {_f(cpu.get('frontend'), '.2f')} / {_f(cpu.get('workers'), '.2f')} "
                f"| {_f(br.get('mean_batch'), '.1f')} |"
            )
    paced = [(r, p) for r in report["results"] for p in r.get("paced", [])]
    if paced:
        lines += [
            "",
            f"## Open loop at {s.get('paced_fraction', 0.7):.0%} of the best closed-loop throughput",
            "",
            "Requests are sent on a fixed schedule; latency counts from when a request was due.",
            "",
            "| model | runtime | body | protocol | offered req/s | served req/s | p50 ms | p99 ms | p99 / p50 | refused | errors |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r, p in paced:
            lines.append(
                f"| {r['model']} | {r['runtime']} | {_kind(r)} | {p['protocol']} | {p['rate']:.1f} | {p['rps']:.1f} "
                f"| {p['p50_ms']:.0f} | {p['p99_ms']:.0f} | {_f(p['p99_over_p50'], '.2f')} | {p.get('refused', 0)} | {p['errors']} |"
            )
    lines += [
        "",
        "## Where the time goes",
        "",
        "Served, per level (TorchServe's counters between two scrapes): client latency (mean), the",
        "frontend's latency per request (receipt to response, queue included), queue wait per request,",
        "and the handler's stages per batch. Client mean − frontend latency = HTTP/gRPC, client and",
        "network; frontend latency − queue − handler stages = frontend↔worker transfer and batching.",
        "Busy: the share of the timed wall time the workers spent in the inference stage.",
        "",
        "| model | runtime | body | protocol | clients | client mean ms | frontend ms | queue ms | preprocess ms/batch | inference ms/batch | postprocess ms/batch | mean batch | inference busy |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        for x in r["served"]:
            br = x.get("breakdown") or {}
            lines.append(
                f"| {r['model']} | {r['runtime']} | {_kind(r)} | {x['protocol']} | {x['concurrency']} | {_f(x.get('mean_ms'))} "
                f"| {_f(br.get('frontend_latency_ms'))} | {_f(br.get('queue_ms'))} | {_f(br.get('preprocess_ms_per_batch'))} "
                f"| {_f(br.get('inference_ms_per_batch'))} | {_f(br.get('postprocess_ms_per_batch'))} | {_f(br.get('mean_batch'))} "
                f"| {_f(br.get('inference_busy_share'), '.0%')} |"
            )
    lines += lone_client_table(report)
    lines += handler_table(report)
    lines += ceiling_table(report)
    staged = [r for r in report["results"] if r.get("stages")]
    if staged:
        lines += [
            "",
            "Inside the handler's inference stage, in-process, ms per request at the serving batch:",
            "",
            "| model | runtime | tokenize | runtime call | MC head | JSON |",
            "|---|---|---:|---:|---:|---:|",
        ]
        for r in staged:
            st = r["stages"]
            lines.append(
                f"| {r['model']} | {r['runtime']} | {st['tokenize']:.2f} | {st['runtime']:.2f} "
                f"| {st['head']:.2f} | {st['json']:.3f} |"
            )
    lines += [
        "",
        "In-process: the bare exported model through handlers/runtime.py, inputs prepared by the handler's",
        "own tokenizer/windowing outside the clock, batches of the served batchSize. Served: the whole path",
        "(client, HTTP/gRPC, TorchServe frontend, batching, handler pre/post-processing, MC-dropout head).",
        "The load generator runs on the same cores as the server: its CPU use is in the closed-loop table.",
        "Each level's in-process figure is taken right after it (same neighbours on shared cores).",
        "",
    ]
    if report.get("oip"):
        from bench.oip import markdown as oip_markdown

        lines += oip_markdown(report["oip"])
    for section in report.get("noop_ceiling") or []:
        from bench.ceiling import markdown as ceiling_markdown

        lines += ceiling_markdown(section)
    return "\n".join(lines)


def lone_clients(report: dict) -> list[dict]:
    """Per REST row: the served p50 of one client against the bare model's batch-1 p50 (the
    batching tax a lone client pays), and the 16-client throughput against the same model, runtime
    and body served with the model-config's own settings (a variant must not cost throughput)."""
    out = []
    base16: dict[tuple, float] = {}
    own16: dict[tuple, float] = {}  # the model-config's own row (its first: its own workers)
    for r in report["results"]:
        at16 = [s for s in r["served"] if s["protocol"] == "rest" and s["concurrency"] == 16]
        if not r.get("variant") and at16:
            key = (r["model"], r["runtime"], r.get("body", "json"))
            base16[(*key, r.get("workers", 1))] = at16[0]["rps"]
            own16.setdefault(key, at16[0]["rps"])
    for r in report["results"]:
        lone = r.get("lone_in_process")
        one = [s for s in r["served"] if s["protocol"] == "rest" and s["concurrency"] == 1]
        if not lone or not one:
            continue
        at16 = [s for s in r["served"] if s["protocol"] == "rest" and s["concurrency"] == 16]
        rps16 = at16[0]["rps"] if at16 else None
        key = (r["model"], r["runtime"], r.get("body", "json"))
        base = base16.get((*key, r.get("workers", 1)))
        if base is None and r.get("variant"):  # a variant that sets its own worker count
            base = own16.get(key)
        out.append(
            {
                "model": r["model"],
                "runtime": r["runtime"],
                "kind": _kind(r),
                "variant": r.get("variant"),
                "bare_p50_ms": lone["p50_ms"],
                "served_p50_ms": one[0]["p50_ms"],
                "tax_ms": one[0]["p50_ms"] - lone["p50_ms"],
                "queue_ms": (one[0].get("breakdown") or {}).get("queue_ms"),
                "rps16": rps16,
                "rps16_over_config": rps16 / base if rps16 and base else None,
            }
        )
    return out


def lone_client_table(report: dict) -> list[str]:
    rows = lone_clients(report)
    if not rows:
        return []
    lines = [
        "",
        "## A lone client: served p50 against the bare model's batch-1 latency (REST)",
        "",
        "Tax: served p50 at 1 client minus the bare model's p50 for one request alone (in-process,",
        "batch 1, the serving threads); queue: TorchServe's queue wait per request at 1 client (the",
        "batch delay a lone request waits out). 16 clients: served req/s, and over the same model",
        "served with the model-config's settings in this run (a variant's cost under load).",
        "",
        "| model | runtime | body | bare batch-1 p50 ms | served p50 ms, 1 client | tax ms | queue ms | 16 clients req/s | × model-config |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for x in rows:
        lines.append(
            f"| {x['model']} | {x['runtime']} | {x['kind']} | {x['bare_p50_ms']:.1f} "
            f"| {x['served_p50_ms']:.1f} | {x['tax_ms']:+.1f} | {_f(x['queue_ms'])} "
            f"| {_f(x['rps16'])} | {_f(x['rps16_over_config'], '.2f')} |"
        )
    return lines


def ceilings(report: dict) -> list[dict]:
    """Per row, at the level its ratio is read (16 clients, else the highest): the throughput the
    workers could reach if they got every core the load generator and the frontend leave, at the
    core time they spent per request at that level. Ceiling / bare says whether a goal on served /
    bare is reachable on this machine at all; served / ceiling how much of the rest is idle cores
    (one worker reading a batch or writing its answers) that another layout could fill."""
    machine = report["machine"]
    cores = (machine.get("cpu") or {}).get("cpus") or machine.get("cpus")
    out = []
    for r in report["results"]:
        for proto, at in _ratio_levels(r):
            cpu = at.get("cpu") or {}
            if (
                not cores
                or not at["rps"]
                or None in (cpu.get("workers"), cpu.get("loadgen"), cpu.get("frontend"))
            ):
                continue
            core_ms = cpu["workers"] / at["rps"] * 1e3
            left = cores - cpu["loadgen"] - cpu["frontend"]
            ceiling = left / core_ms * 1e3
            out.append(
                {
                    "model": r["model"],
                    "runtime": r["runtime"],
                    "kind": _kind(r),
                    "protocol": proto,
                    "clients": at["concurrency"],
                    "worker_core_ms": core_ms,
                    "cores_left": left,
                    "idle_cores": left - cpu["workers"],
                    "ceiling_rps": ceiling,
                    "ceiling_over_bare": ceiling / _bare(r, at),
                    "served_over_ceiling": at["rps"] / ceiling,
                }
            )
    return out


def ceiling_table(report: dict) -> list[str]:
    rows = [
        f"| {x['model']} | {x['runtime']} | {x['kind']} | {x['protocol']} | {x['clients']} "
        f"| {x['worker_core_ms']:.1f} | {x['cores_left']:.2f} | {x['idle_cores']:.2f} "
        f"| {x['ceiling_rps']:.1f} | {x['ceiling_over_bare']:.2f} | {x['served_over_ceiling']:.2f} |"
        for x in ceilings(report)
    ]
    if not rows:
        return []
    return [
        "",
        "What these cores allow: the workers' CPU time per served request at the level the ratio is",
        "read, and the req/s they would reach with every core the load generator and the frontend",
        "leave (the ceiling). Ceiling / bare below a served / bare goal: the goal needs a cheaper",
        "handler or more cores, not another layout; served / ceiling below 1: idle cores (one worker",
        "reading a batch or writing its answers) that another worker layout could fill.",
        "",
        "| model | runtime | body | protocol | clients | worker core-ms / request | cores left to workers | idle cores | ceiling req/s | ceiling / bare | served / ceiling |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
    ]


def handler_table(report: dict) -> list[str]:
    """Models with a handler-path row: the handler's whole path in process per body kind against the bare model, and
    the best served throughput of that body kind against both."""
    rows, seen = [], set()
    for r in report["results"]:
        h = r.get("handler_in_process")
        key = (r["model"], r["runtime"], r.get("body", "json"))
        if not h or key in seen:
            continue
        seen.add(key)
        bare = r["in_process"]["rps"]
        served = [
            s
            for x in report["results"]
            if (x["model"], x["runtime"], x.get("body", "json")) == key
            for s in x["served"]
        ]
        best = max((s["rps"] for s in served), default=None)
        rows.append(
            f"| {r['model']} | {r['runtime']} | {key[2]} | {bare:.1f} | {h['rps']:.1f} "
            f"| {h['rps'] / bare:.2f} | {_f(best)} | {_f(best / h['rps'] if best else None, '.2f')} |"
        )
    if not rows:
        return []
    return [
        "",
        "The handler's whole path in process (wire bytes in, answer bytes out: decoding, windows,",
        "runtime, std band, stitching, encoding) against the bare model, before the server starts;",
        "best served: the best level of that body kind over every protocol and worker count:",
        "",
        "| model | runtime | body | bare model req/s | handler in-process req/s | handler / bare | best served req/s | served / handler |",
        "|---|---|---|---:|---:|---:|---:|---:|",
        *rows,
    ]


def plot(report: dict, path: Path) -> Path:
    """Throughput and p99 against concurrency, one line per model/runtime/protocol."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_rps, ax_p99) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(report["results"]):
        color = colors[i % len(colors)]  # one colour per model/runtime, line style per protocol
        for proto in sorted({s["protocol"] for s in r["served"]}):
            levels = sorted(
                (s for s in r["served"] if s["protocol"] == proto), key=lambda s: s["concurrency"]
            )
            c = [s["concurrency"] for s in levels]
            label = f"{r['model']} {r['runtime']} {_kind(r)} {proto}"
            style = "-" if proto == "rest" else "--"
            ax_rps.plot(c, [s["rps"] for s in levels], style, color=color, marker="o", label=label)
            ax_p99.plot(
                c, [s["p99_ms"] for s in levels], style, color=color, marker="o", label=label
            )
        ax_rps.axhline(r["in_process"]["rps"], color=color, lw=0.8, ls=":")
    ax_rps.set(xlabel="concurrent clients", ylabel="requests / s", title="served throughput")
    ax_p99.set(xlabel="concurrent clients", ylabel="p99 latency (ms)", title="p99 latency")
    for ax in (ax_rps, ax_p99):
        ax.set_xscale("log", base=2)
        ax.grid(alpha=0.3)
    ax_rps.legend(fontsize=7)
    fig.suptitle("dotted: in-process (bare model) throughput", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
