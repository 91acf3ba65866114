"""The judgement of a rollout: a candidate model version against the stable one, on the same
requests. Each model's thresholds are data in its folder (handlers/<model>/rollout.yaml, parsed and
checked here by `Thresholds`); `analyse` takes both versions' answers (with statuses and latencies)
and returns the metrics and a verdict whose reason names the metric, its value and its threshold.

    python -m deploy.rollout judge MODEL --stable URL --candidate URL [--token-file F]
        [--requests 40] [--seed 0] [--bodies FILE.jsonl] [--out verdict.json]
        [--runtime torchserve|oip] [--copies URL [--min-copies N]]
    python -m deploy.rollout bodies MODEL [--requests 40] [--seed 0] > MODEL.jsonl

`judge` sends the same requests (the model's held-out load payloads, tools/<model>/samples.py, or
one JSON body a line from --bodies) to both versions' REST doors (with --runtime oip, the Open Inference Protocol's /v2 inference
route, the body as tensors), judges the answers and prints the
metrics table and the verdict; exit status 0 PASS, 1 FAIL, 2 bad usage. `bodies` writes those
held-out payloads, one JSON body a line, where the tools and their data are installed (a
checkout), for a judge that runs where they are not (the serving image: the Argo Rollouts
analysis Job reads them from a ConfigMap, docs/kubernetes.md). With --copies, `judge` sends the
clients' own requests instead: the newest --requests the mirror's recorder (deploy/mirror.py)
copied for the model and no judgement took before; fewer than --min-copies (default: all of
--requests) fail the judgement, exit 1, whatever --bodies holds, which only tops them up.
`make rollout` (rehearsal/rollout.py) runs the same comparison at every step of a local shadow and
canary rollout.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from deploy.mirror import JUDGE_HEADER, Copy, Raw, replayable

ROOT = Path(__file__).resolve().parent.parent


class Thresholds(BaseModel):
    """handlers/<model>/rollout.yaml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["classifier", "components"]
    min_label_agreement: float | None = Field(default=None, ge=0, le=1)
    max_component_mad: float | None = Field(default=None, ge=0)
    max_entropy_shift: float | None = Field(default=None, ge=0)
    max_ood_rate_shift: float = Field(ge=0, le=1)
    max_error_rate_increase: float = Field(ge=0, le=1)
    max_p99_ratio: float = Field(gt=0)
    p99_floor_s: float = Field(default=0.0, ge=0)
    """Both p99s count as at least this in the ratio: below it is a shared CPU's scheduling
    noise, not the model (a 30 ms p99 against a 10 ms one is no regression)."""
    min_requests: int = Field(ge=1)

    def model_post_init(self, _context: Any) -> None:
        need = "min_label_agreement" if self.kind == "classifier" else "max_component_mad"
        if getattr(self, need) is None:
            raise ValueError(f"rollout thresholds of kind {self.kind} need {need}")


def thresholds(model: str, root: Path = ROOT) -> Thresholds:
    path = root / "handlers" / model / "rollout.yaml"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no rollout thresholds for {model}")
    return Thresholds.model_validate(yaml.safe_load(path.read_text()))


@dataclass(frozen=True)
class Exchange:
    """One request as one version answered it: its HTTP status, latency and parsed body; status 0
    when no answer came, `timed_out` when that was for want of time (a hung or stalled version)."""

    status: int
    latency_s: float
    body: Any = None
    timed_out: bool = False


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str
    metrics: dict[str, float] = field(default_factory=dict)


def _answers(body: Any) -> list[dict]:
    """A body's answers: one dict, or a list of them (a batch of records)."""
    if isinstance(body, dict):
        return [body]
    if isinstance(body, list):
        return [b for b in body if isinstance(b, dict)]
    return []


def _entropy(answer: dict) -> float | None:
    probs = answer.get("probabilities")
    if isinstance(probs, dict):
        probs = list(probs.values())
    if not isinstance(probs, list) or not probs:
        return None
    return -sum(float(p) * math.log(float(p)) for p in probs if float(p) > 0)


def _ood(answer: dict) -> bool:
    return bool(answer.get("out_of_distribution"))


def _components(answer: dict) -> list[float]:
    """Frequency: every extracted component's samples, in the answer's order (its `components`
    list of {"frequency", "signal", "std"}: handlers/kits/signal/codec.answer_json)."""
    return [
        float(x)
        for c in answer.get("components") or []
        if isinstance(c, dict)
        for x in c.get("signal") or []
    ]


def _p99(values: Sequence[float]) -> float:
    if not values:
        return math.nan
    s = sorted(values)
    return s[min(len(s) - 1, math.ceil(0.99 * len(s)) - 1)]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def analyse(
    limits: Thresholds, stable: Sequence[Exchange], candidate: Sequence[Exchange]
) -> Verdict:
    """Compare the two versions over the same requests (paired by position)."""
    if len(stable) != len(candidate):
        raise ValueError("stable and candidate must answer the same requests")
    n = len(stable)
    m: dict[str, float] = {"requests": float(n)}
    err_s = sum(e.status >= 500 or e.status == 0 for e in stable) / n if n else math.nan
    err_c = sum(e.status >= 500 or e.status == 0 for e in candidate) / n if n else math.nan
    m["error_rate_stable"], m["error_rate_candidate"] = err_s, err_c
    tout_s = sum(e.timed_out for e in stable) / n if n else math.nan
    tout_c = sum(e.timed_out for e in candidate) / n if n else math.nan
    m["timeout_rate_stable"], m["timeout_rate_candidate"] = tout_s, tout_c
    m["p99_s_stable"] = _p99([e.latency_s for e in stable if e.status == 200])
    m["p99_s_candidate"] = _p99([e.latency_s for e in candidate if e.status == 200])
    pairs = [
        (a, b)
        for s, c in zip(stable, candidate, strict=True)
        if s.status == 200 and c.status == 200
        for a, b in zip(_answers(s.body), _answers(c.body), strict=False)
    ]
    m["compared"] = float(len(pairs))
    for name, side in (("stable", 0), ("candidate", 1)):
        ents = [e for e in (_entropy(p[side]) for p in pairs) if e is not None]
        m[f"entropy_{name}"] = _mean(ents)
        m[f"ood_rate_{name}"] = _mean([float(_ood(p[side])) for p in pairs])
    if limits.kind == "classifier":
        m["label_agreement"] = _mean([float(a.get("label") == b.get("label")) for a, b in pairs])
    else:
        diffs = [
            abs(x - y)
            for a, b in pairs
            for x, y in zip(_components(a), _components(b), strict=False)
        ]
        m["component_mad"] = _mean(diffs)
    # Availability first: a candidate that does not answer (in time) is named as such, not as
    # "too few answers compared".
    m["timeout_rate_increase"] = tout_c - tout_s
    m["error_rate_increase"] = err_c - err_s
    bound = limits.max_error_rate_increase
    checks: list[tuple[str, float, str, float]] = [
        ("timeout_rate_increase", tout_c - tout_s, "<=", bound),
        ("error_rate_increase", err_c - err_s, "<=", bound),
        ("compared", m["compared"], ">=", limits.min_requests),
    ]
    if limits.min_label_agreement is not None and "label_agreement" in m:
        checks.append(("label_agreement", m["label_agreement"], ">=", limits.min_label_agreement))
    if limits.max_component_mad is not None and "component_mad" in m:
        checks.append(("component_mad", m["component_mad"], "<=", limits.max_component_mad))
    if limits.max_entropy_shift is not None:
        shift = abs(m["entropy_candidate"] - m["entropy_stable"])
        m["entropy_shift"] = shift
        checks.append(("entropy_shift", shift, "<=", limits.max_entropy_shift))
    m["ood_rate_shift"] = abs(m["ood_rate_candidate"] - m["ood_rate_stable"])
    checks.append(("ood_rate_shift", m["ood_rate_shift"], "<=", limits.max_ood_rate_shift))
    floor = limits.p99_floor_s
    if max(m["p99_s_stable"], floor) > 0 and not math.isnan(m["p99_s_candidate"]):
        m["p99_ratio"] = max(m["p99_s_candidate"], floor) / max(m["p99_s_stable"], floor)
        checks.append(("p99_ratio", m["p99_ratio"], "<=", limits.max_p99_ratio))
    for name, value, op, bound in checks:
        ok = value >= bound if op == ">=" else value <= bound
        if math.isnan(value) or not ok:
            return Verdict(False, f"{name} {value:.4f} not {op} {bound:g}", m)
    return Verdict(True, "every metric within its threshold", m)


def table(verdict: Verdict) -> str:
    """The metrics as a Markdown table, then the verdict."""
    rows = ["| metric | value |", "|---|---:|"]
    rows += [f"| {k} | {v:.4f} |" for k, v in verdict.metrics.items()]
    word = "PASS" if verdict.passed else "FAIL"
    return "\n".join(rows) + f"\n\n{word}: {verdict.reason}\n"


RUNTIMES = ("torchserve", "oip")
"""What serves both versions (the pod's RUNTIME): TorchServe's `POST /predictions/<model>` with the
model's JSON body, or the Open Inference Protocol server's `POST /v2/models/<model>/infer` with the
same body as tensors (`oip_request`), its answer read back into the JSON rows (`oip_rows`)."""


def _datatype(values: list[Any]) -> str:
    if all(isinstance(v, bool) for v in values):
        return "BOOL"
    if all(isinstance(v, str) for v in values):
        return "BYTES"
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return "FP64"
    raise ValueError(f"no tensor datatype holds {repr(values)[:80]}: a field of named scalars only")


Inputs = tuple[list[dict[str, Any]], dict[str, Any]]
"""A request's input tensors (name, datatype, shape, data) and its request parameters."""


def _tensor(name: str, datatype: str, shape: list[int], data: list[Any]) -> dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": shape, "data": data}


def _fields(body: Any, allowed: tuple[str, ...], what: str) -> dict[str, Any]:
    """A JSON object's fields, each one the contract has a tensor or parameter for (null: absent,
    as the JSON clients' reading takes it)."""
    if not isinstance(body, dict):
        raise ValueError(f"the body must be a JSON object ({what}), not {type(body).__name__}")
    unknown = [k for k in body if k not in allowed]
    if unknown:
        raise ValueError(
            f"field {unknown[0]!r} has no tensor or parameter in the contract (it reads "
            f"{', '.join(map(repr, allowed))})"
        )
    return {k: v for k, v in body.items() if v is not None}


def _one_or_many(body: Any, one: str, many: str) -> list[Any]:
    """{one: x} or {many: [x, ...]}: the items, one tensor element each."""
    fields = _fields(body, (one, many), f'"{one}" or "{many}"')
    if (one in fields) == (many in fields):
        raise ValueError(f'the body needs "{one}" or "{many}", one of them')
    if one in fields:
        return [fields[one]]
    items = fields[many]
    if not isinstance(items, list) or not items:
        raise ValueError(f'"{many}" must be a non-empty list: nothing to send as tensors')
    return items


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _text_inputs(body: Any) -> Inputs:
    """The text kit (handlers/kits/text/oip.py): each text one element of the BYTES input `text`."""
    texts = _one_or_many(body, "text", "texts")
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise ValueError(f"text {i} is {type(t).__name__}: a BYTES element must be a string")
    return [_tensor("text", "BYTES", [len(texts)], texts)], {}


def _image_inputs(body: Any) -> Inputs:
    """The image kit (handlers/kits/image/oip.py): base64 files as the BYTES input `image` (each
    element the decoded file's bytes), grids as the FP32 input `grid` (images x rows x columns)."""
    images = _one_or_many(body, "image", "images")
    if all(isinstance(x, str) for x in images):
        files = []
        for i, x in enumerate(images):
            try:
                files.append(base64.b64decode(x, validate=True))
            except ValueError:
                raise ValueError(f"image {i} is a string but not base64: no file to send") from None
        return [_tensor("image", "BYTES", [len(files)], files)], {}
    if not all(isinstance(x, list) for x in images):
        raise ValueError(
            "a request's images go as one input: all base64 files (image) or all grids (grid)"
        )
    for i, grid in enumerate(images):
        if not grid or not all(isinstance(r, list) and all(map(_number, r)) for r in grid):
            raise ValueError(f"image {i} is not a grid: rows of numbers only")
    rows, cols = len(images[0]), len(images[0][0])
    if any(len(g) != rows or any(len(r) != cols for r in g) for g in images):
        raise ValueError(
            f"the grids are not all {rows} x {cols}: one FP32 tensor holds grids of the same size"
        )
    data = [x for g in images for r in g for x in r]
    return [_tensor("grid", "FP32", [len(images), rows, cols], data)], {}


SIGNAL_FIELDS = ("signal", "frequencies", "sample_rate", "stream", "state", "band")
"""The signal kit's JSON request fields (handlers/kits/signal/codec.py `decode_request`)."""


def _signal_inputs(body: Any) -> Inputs:
    """The signal kit (handlers/kits/signal/oip.py): the samples as the FP32 input `signal`, the
    options as request parameters (`frequencies` a comma list, `sample_rate`, `stream`, `state`,
    `band`)."""
    fields = _fields(body, SIGNAL_FIELDS, "a 'signal' and its options")
    signal = fields.get("signal")
    if not isinstance(signal, list) or not signal:
        raise ValueError("the body needs 'signal', a non-empty list of numbers")
    if not all(map(_number, signal)):
        raise ValueError("'signal' must be a flat list of numbers: the FP32 input is samples")
    parameters: dict[str, Any] = {}
    freqs = fields.get("frequencies")
    if isinstance(freqs, list) and freqs and all(map(_number, freqs)):
        parameters["frequencies"] = ",".join(str(f) for f in freqs)  # exact: int or float repr
    elif isinstance(freqs, str):
        parameters["frequencies"] = freqs
    elif freqs is not None:
        raise ValueError("'frequencies' must be a non-empty list of numbers (or a comma list)")
    rate = fields.get("sample_rate")
    if rate is not None:
        if not (_number(rate) or isinstance(rate, str)):
            raise ValueError("'sample_rate' must be a number")
        parameters["sample_rate"] = rate
    for name, kind in (("stream", bool), ("band", bool), ("state", str)):
        if name in fields:
            if not isinstance(fields[name], kind):
                raise ValueError(f"'{name}' must be a {kind.__name__}: a request parameter")
            parameters[name] = fields[name]
    return [_tensor("signal", "FP32", [len(signal)], signal)], parameters


def _record_inputs(body: Any) -> Inputs:
    """Tabular's contract (handlers/tabular/oip.py): one input per field, named as the field, one
    element per record (one record, or {"records": [...]})."""
    records = body.get("records") if isinstance(body, dict) and "records" in body else [body]
    if not records or not all(isinstance(r, dict) for r in records):
        raise ValueError("an OIP rollout sends records of named fields (a JSON object each)")
    names = list(records[0])
    if any(list(r) != names for r in records):
        raise ValueError("every record must name the same fields, in the same order")
    inputs = []
    for name in names:
        column = [r[name] for r in records]
        inputs.append(_tensor(name, _datatype(column), [len(column)], column))
    return inputs, {}


OIP_INPUTS: dict[str, Callable[[Any], Inputs]] = {
    "text": _text_inputs,
    "image": _image_inputs,
    "signal": _signal_inputs,
    "tabular": _record_inputs,
}
"""A model's JSON body as its tensor contract's inputs, by the kit its registry line names (the
kit's oip.py, tabular's own handlers/tabular/oip.py): the inverse of its `request_of`."""


def _kit(model: str) -> str:
    from handlers.registry import get  # the registry line only: no model is imported

    try:
        kits = get(model).kits
    except KeyError as e:
        raise ValueError(e.args[0]) from None
    if len(kits) != 1 or kits[0] not in OIP_INPUTS:
        raise ValueError(f"{model}: no OIP request form for its kits {kits}")
    return kits[0]


def oip_request(body: Any, model: str) -> dict[str, Any]:
    """A model's JSON body (what its TorchServe clients send) as the Open Inference Protocol's
    inference request its tensor contract reads (`OIP_INPUTS`): a ValueError naming why where the
    body is no request of the contract's tensors. BYTES elements that are a file's bytes (an
    encoded image) stay bytes: `oip_encode` sends them as binary data."""
    inputs, parameters = OIP_INPUTS[_kit(model)](body)
    return {"inputs": inputs} | ({"parameters": parameters} if parameters else {})


def oip_encode(request: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """An inference request as a REST body and its headers: JSON, or where an input's elements are
    bytes (JSON carries only UTF-8 text) the binary-data extension (the JSON head of
    `Inference-Header-Content-Length` bytes, then each such input's elements, each a little-endian
    4-byte length and its bytes)."""
    head, tail = [], b""
    for item in request["inputs"]:
        if item["datatype"] == "BYTES" and any(isinstance(x, bytes) for x in item["data"]):
            raw = b"".join(
                len(b).to_bytes(4, "little") + b
                for b in (x if isinstance(x, bytes) else str(x).encode() for x in item["data"])
            )
            parameters = dict(item.get("parameters") or {}) | {"binary_data_size": len(raw)}
            head.append({k: v for k, v in item.items() if k != "data"} | {"parameters": parameters})
            tail += raw
        else:
            head.append(item)
    if not tail:
        return json.dumps(request).encode(), {"Content-Type": "application/json"}
    text = json.dumps(request | {"inputs": head}).encode()
    return text + tail, {
        "Content-Type": "application/octet-stream",
        "Inference-Header-Content-Length": str(len(text)),
    }


def _matrix(out: dict[str, Any]) -> list[list[Any]]:
    """A 2-D output's rows (its data flat row-major, or nested)."""
    data = list(out.get("data") or [])
    if data and isinstance(data[0], list):
        return data
    rows, cols = (list(out.get("shape") or []) + [0, 0])[:2]
    return [data[i * cols : (i + 1) * cols] for i in range(rows)]


def _signal_answer(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    """The signal kit's output tensors (handlers/kits/signal/oip.py) as its JSON answer
    (codec.answer_json, less the model block): one component per frequency, its `signal` and
    (when asked with the band) `std`."""
    named = {o["name"]: o for o in outputs}

    def scalar(name: str) -> Any:
        data = (named.get(name) or {}).get("data") or [None]
        return data[0]

    freqs = list(named["frequencies"]["data"]) if "frequencies" in named else []
    signal = _matrix(named["signal"]) if "signal" in named else []
    std = _matrix(named["std"]) if "std" in named else None
    components = [
        {"frequency": f, "signal": signal[j]} | ({} if std is None else {"std": std[j]})
        for j, f in enumerate(freqs)
    ]
    body = {name: scalar(name) for name in ("sample_rate", "out_of_distribution", "residual")}
    body |= {name: scalar(name) for name in ("nonstationarity", "offset")}
    body["components"] = components
    if "state" in named:
        body |= {"state": scalar("state"), "samples_seen": scalar("samples_seen")}
    return body


def _rows(outputs: list[dict[str, Any]]) -> Any:
    rows: list[dict[str, Any]] = []
    for out in outputs:
        shape, data = out.get("shape") or [len(out["data"])], list(out.get("data") or [])
        n = int(shape[0]) if shape else 1
        width = len(data) // n if n else 0
        for i in range(n):
            if len(rows) <= i:
                rows.append({})
            flat = len(shape) > 1 and len(data) != n  # row-major, else one element a row
            rows[i][out["name"]] = data[i * width : (i + 1) * width] if flat else data[i]
    return rows[0] if len(rows) == 1 else rows


def oip_rows(answer: Any, model: str) -> Any:
    """An inference answer's output tensors as the JSON the model answers TorchServe's clients
    with, by its contract: a classifier's rows (row i holds each output's i-th element, a list
    where the output has more than one dimension, e.g. the classes' probabilities in the classes'
    order; one item's answer is one row, as a one-item JSON body's is), the signal kit's one
    answer of components (`_signal_answer`). Anything else is returned as it is (an error
    body)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("outputs"), list):
        return answer
    if _kit(model) == "signal":
        return _signal_answer(answer["outputs"])
    return _rows(answer["outputs"])


def send(
    url: str,
    model: str,
    body: Any,
    token: str | None,
    timeout: float = 30,
    runtime: str = "torchserve",
) -> Exchange:
    """POST one JSON body to `url`/predictions/<model> (with runtime "oip": as tensors to
    `url`/v2/models/<model>/infer, the answer read back into rows), or a mirrored `Raw` request as
    it came (its answer is JSON: the judge asks for no other); status 0 when no answer came at
    all."""
    # The judge's requests are marked: a mirror in front of a version's door does not copy them.
    headers = {"Content-Type": "application/json", JUDGE_HEADER: "1"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    if isinstance(body, Raw):  # a client's own non-JSON request, mirrored: sent as it came
        path, data = f"predictions/{model}", body.body
        headers |= dict(body.headers) | {"Content-Type": body.content_type}
    elif runtime == "oip":
        # A client's own request, mirrored, is already in the protocol's form.
        is_oip = isinstance(body, dict) and "inputs" in body
        path = f"v2/models/{model}/infer"
        data, kind = oip_encode(body if is_oip else oip_request(body, model))
        headers |= kind
    else:
        path, data = f"predictions/{model}", json.dumps(body).encode()
    request = urllib.request.Request(f"{url.rstrip('/')}/{path}", data, headers)
    start = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            raw, status = answer.read(), answer.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    except OSError as e:
        waited = isinstance(e, TimeoutError) or isinstance(getattr(e, "reason", None), TimeoutError)
        return Exchange(0, time.perf_counter() - start, timed_out=waited)
    latency = time.perf_counter() - start
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if runtime == "oip" and status == 200:
        parsed = oip_rows(parsed, model)
    return Exchange(status, latency, parsed)


def paired(
    model: str,
    stable_url: str,
    candidate_url: str,
    bodies: Sequence[Any],
    token: str | None,
    workers: int = 4,
    timeout: float = 30,
    runtime: str = "torchserve",
) -> tuple[list[Exchange], list[Exchange]]:
    """Each body sent to both versions (a few at a time); their exchanges, paired by position."""
    with ThreadPoolExecutor(workers) as pool:  # interleaved: both wait in the same queue
        pairs = [
            (pool.submit(send, stable_url, model, b, token, timeout, runtime),
             pool.submit(send, candidate_url, model, b, token, timeout, runtime))
            for b in bodies
        ]  # fmt: skip
        return [s.result() for s, _ in pairs], [c.result() for _, c in pairs]


def body_source(model: str, seed: int = 0) -> Callable[[], Any]:
    """A draw of the model's held-out load payloads (tools/<model>/samples.py `payloads`)."""
    from tools.registry import get

    payloads = get(model).samples().payloads
    if payloads is None:
        raise ValueError(f"{model} has no load payloads to judge on: pass --bodies")
    return payloads(seed=seed)


def judge_bodies(model: str, n: int, seed: int = 0) -> list[Any]:
    """`n` of the model's held-out load payloads."""
    draw = body_source(model, seed)
    return [draw() for _ in range(n)]


def mirrored_bodies(url: str, model: str, n: int, runtime: str, timeout: float = 10) -> list[Any]:
    """Up to `n` of the newest client requests for `model` the mirror's recorder at `url` holds
    and no judgement took before (deploy/mirror.py), on the route `runtime` serves, as the judge
    sends them (`replayable`: a stream's continuation is taken, not sent)."""
    route = "infer" if runtime == "oip" else "predictions"
    query = urllib.parse.urlencode({"model": model, "route": route, "n": n})
    with urllib.request.urlopen(f"{url.rstrip('/')}/copies?{query}", timeout=timeout) as answer:
        copies = [Copy.from_line(x) for x in answer.read().decode().splitlines() if x.strip()]
    return replayable(copies, raw=runtime != "oip")


def verdict_json(model: str, verdict: Verdict, **extra: Any) -> dict[str, Any]:
    metrics = {k: (None if math.isnan(v) else round(v, 6)) for k, v in verdict.metrics.items()}
    return {
        "model": model,
        "passed": verdict.passed,
        "reason": verdict.reason,
        "metrics": metrics,
    } | extra


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m deploy.rollout",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)
    j = sub.add_parser("judge", help="compare a candidate's answers with the stable version's")
    j.add_argument("model")
    j.add_argument("--stable", required=True, help="the stable version's REST base URL")
    j.add_argument("--candidate", required=True, help="the candidate's REST base URL")
    j.add_argument("--token-file", type=Path, help="a file whose first line is a client token")
    j.add_argument(
        "--requests", type=int, default=40, help="requests to send to both (payloads or copies)"
    )
    j.add_argument("--seed", type=int, default=0)
    j.add_argument("--bodies", type=Path, help="JSON bodies to send, one a line (not payloads)")
    j.add_argument(
        "--copies",
        metavar="URL",
        help="the mirror's recorder: judge on the newest client requests it copied (deploy/mirror.py)",
    )
    j.add_argument(
        "--min-copies",
        type=int,
        help="with --copies: fewer client requests than this fail the judgement; the rest up to "
        "--requests come from --bodies (default: all of --requests, no top-up)",
    )
    j.add_argument("--out", type=Path, help="write the verdict and metrics here (JSON)")
    j.add_argument(
        "--runtime", choices=RUNTIMES, default="torchserve", help="what serves both versions"
    )
    b = sub.add_parser("bodies", help="print held-out payloads, one JSON body a line (--bodies)")
    b.add_argument("model")
    b.add_argument("--requests", type=int, default=40, help="how many payloads")
    b.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.command == "bodies":
        for body in judge_bodies(args.model, args.requests, args.seed):
            print(json.dumps(body))
        return 0
    try:
        limits = thresholds(args.model)
    except (FileNotFoundError, ValueError) as e:
        print(f"rollout: {e}", file=sys.stderr)
        return 2
    token = args.token_file.read_text().split()[0] if args.token_file else None
    bodies: list[Any] = []
    if args.bodies:
        bodies = [json.loads(x) for x in args.bodies.read_text().splitlines() if x.strip()]
    elif not args.copies:
        bodies = judge_bodies(args.model, args.requests, args.seed)
    mirrored = 0
    if args.copies:
        # The clients' own requests first; held-out bodies only top them up, and never stand in
        # for them: with fewer copies than --min-copies the canary has no evidence to pass on.
        need = args.requests if args.min_copies is None else args.min_copies
        try:
            copies = mirrored_bodies(args.copies, args.model, args.requests, args.runtime)
            why = ""
        except (OSError, ValueError) as e:
            copies, why = [], f" (the recorder at {args.copies}: {e})"
        mirrored = len(copies)
        if mirrored < need:
            reason = f"mirrored_requests {mirrored} not >= {need}: too few client requests{why}"
            verdict = Verdict(False, reason, {"mirrored_requests": float(mirrored)})
            return report(verdict, args)
        bodies = copies + bodies[: args.requests - mirrored]
    if args.runtime == "oip":  # every body as tensors, before anything is sent
        try:
            for body in bodies:
                if not (isinstance(body, dict) and "inputs" in body):  # a copy is in that form
                    oip_request(body, args.model)
        except ValueError as e:
            print(f"rollout: {args.model} over the OIP: {e}", file=sys.stderr)
            return 2
    stable, candidate = paired(
        args.model, args.stable, args.candidate, bodies, token, runtime=args.runtime
    )
    verdict = analyse(limits, stable, candidate)
    if args.copies:
        verdict.metrics["mirrored_requests"] = float(mirrored)
    return report(verdict, args)


def report(verdict: Verdict, args: argparse.Namespace) -> int:
    """The judgement's table on stdout (and its JSON in --out); the exit status by the verdict."""
    print(table(verdict), end="")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(verdict_json(args.model, verdict), indent=2) + "\n")
    return 0 if verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
