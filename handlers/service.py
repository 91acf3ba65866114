"""The serving lifecycle every model shares, with no TorchServe in it: a batch of raw requests in,
one reply or one error per request out.

`ModelService(model).handle_batch(requests)` is what the TorchServe handler (handlers/base.py, a thin
adapter), the MLflow PyFunc, bench and the tests all call, so an answer in process is the answer
served, work budget included. Per batch:

- parse, per request: the model decodes and validates (a bad request becomes its `RequestError`);
  any other exception becomes that request's own 500 with its request id, logged with the
  traceback. Each request's mode is its own: a request for an explanation (`/explanations`, KServe
  `:explain`, or over gRPC an `explain` input of "true" beside the body) is explained, its
  neighbours are predicted; a model without `explain` refuses it alone with 501;
- inference: the model's declared work budgets (`budgets`, `explain_budgets`: handlers/budget.py)
  refuse what the batch cannot afford, priced from the parsed requests before any work; then the
  model's batched call over the admitted predictions, and its `explain` over the admitted
  explanations. If a call raises, its requests run again one
  at a time, so only the request that fails alone gets a 500 and its neighbours get the answers
  they get alone;
- reply: each answer is written by the model's `reply` (a failure there is that request's 500);
- report: the model's telemetry of the answered requests (a failure there is only logged).

A model provides the `Model` protocol below, one class per model in `handlers/<name>/model.py`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self

from handlers import budget
from handlers.archive import ArchiveConfig
from handlers.budget import Budget
from handlers.codec import Reply, request_header
from handlers.errors import ArchiveError, InternalError, NotServed, RequestError
from handlers.explain import WorkShare
from handlers.manifest import read_manifest
from handlers.settings import ServingSettings
from handlers.telemetry import Telemetry

log = logging.getLogger(__name__)

EXPLAIN_HEADER = "explain"
"""Set by TorchServe's frontend to "True" on /explanations, /v1/models/<m>:explain and
/v2/models/<m>/explain."""

EXPLAIN_INPUT = "explain"
"""Over gRPC (TorchServe 0.12's inference.proto has no explanations RPC and the frontend sets no
explain header there): an input of this name with the value "true" beside the body."""


@dataclass(frozen=True)
class Request:
    """One raw request, as any server receives it: what an adapter (handlers/base.py for
    TorchServe, training/pyfunc_model.py for MLflow, bench and the tests in process) builds once.
    Model code reads this and nothing of the server that received it."""

    body: bytes | str | dict | list | None
    """The body: raw bytes, decoded text, or JSON a server already parsed; None when there is none."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP-style request headers, names in the client's case (look them up with
    handlers/codec.request_header)."""
    id: str | None = None
    """The request id (the client's X-Request-ID when given, else the server's), for log lines and
    the 500 a client can quote."""
    parts: Mapping[str, Any] = field(default_factory=dict)
    """Named parts beside the body: gRPC inputs, form fields, OIP inputs/parameters (e.g. "explain",
    "state")."""
    media_type: str | None = None
    """The body's media type (Content-Type without parameters, lower-case); None: read it from the
    Content-Type header (handlers/codec.body_media_type)."""
    typed: Any = None
    """The kit's typed request, when a tensor adapter (oip/) already read it from its tensors: the
    model checks it against its limits instead of decoding a body (`body` is then None)."""
    explain: bool = False
    """The adapter read an explanation request from its own protocol (an OIP `explain` parameter)."""


class Model(Protocol):
    """What each model provides to the lifecycle."""

    name: str
    """The served name (TorchServe's registered name), reported in every answer."""

    @property
    def settings(self) -> ServingSettings:
        """The one settings object, parsed and validated (its spec's settings class)."""
        ...

    reads_parts: ClassVar[bool]
    """The model reads named parts beside the body (`Request.parts`: form fields, gRPC inputs) as
    parameters: then only a part named "body" or "data" is the body (handlers/base.py), and a
    multipart form of several parts is not refused (handlers/codec.request_body)."""

    @classmethod
    def load(cls, model_dir: Path, config: dict, device: str, name: str) -> Model:
        """Load from the unpacked archive or artifact dir with the model-config `handler:` block;
        a bad archive raises ArchiveError."""
        ...

    def parse(self, request: Request) -> Any:
        """One request → the model's request, or raise a RequestError."""
        ...

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """The work budgets of a batch of predictions, applied in order before `inference`."""
        ...

    def inference(self, parsed: list[Any]) -> list[Any]:
        """The batch's admitted requests (RequestErrors among them) → one answer or RequestError
        each, in order."""
        ...

    def reply(self, answer: Any) -> Reply:
        """One answer → its body, content type and headers (the answer serialises itself)."""
        ...

    def report(self, answers: list[Any], telemetry: Telemetry) -> None:
        """Model-specific telemetry of the batch's answered (not refused) requests."""
        ...

    # Optional: a model that explains its answers (POST /explanations/<name>) also has
    #   explain(parsed: list[request | RequestError]) -> list[explanation | RequestError]
    # and `explain_budgets: tuple[Budget, ...]` (applied before it); each explanation has
    # `reply() -> Reply`.


@dataclass(frozen=True)
class Explain:
    """A parsed request that asked for an explanation instead of a prediction."""

    request: Any


@dataclass(frozen=True)
class Explained:
    """An explanation answer (it writes its own reply)."""

    answer: Any


def wants_explanation(request: Request) -> bool:
    """This request's mode, from its own flag, headers or gRPC inputs only."""
    if request.explain:
        return True
    if str(request_header(dict(request.headers), EXPLAIN_HEADER)).strip().lower() == "true":
        return True
    value = request.parts.get(EXPLAIN_INPUT)
    if isinstance(value, bytes | bytearray):
        value = bytes(value[:8]).decode("ascii", "replace")
    return isinstance(value, str) and value.strip().lower() == "true"


def model_class(family: str) -> Any:
    """The `Model` class of a registered model family (its spec, handlers/registry.py)."""
    from handlers import registry

    try:
        return registry.get(family).spec().model
    except KeyError as err:
        raise ArchiveError(
            f"no model named {family!r}; known: {', '.join(registry.names())}"
        ) from err


class ModelService:
    """One model's lifecycle over batches of raw requests (see the module docstring)."""

    def __init__(self, model: Model, telemetry: Telemetry | None = None):
        self.model = model
        self.telemetry = telemetry if telemetry is not None else Telemetry(None, model.name)
        """No TorchServe: a Telemetry without metrics emits nothing (refusals are still logged)."""
        self.explain_share = WorkShare(model.settings.explain_share)
        """Explanations' share of this worker's time (handlers/explain.py)."""

    @classmethod
    def from_dir(
        cls,
        model_dir: str | Path,
        name: str | None = None,
        config: dict | None = None,
        device: str = "cpu",
        model: Any = None,
        telemetry: Telemetry | None = None,
    ) -> Self:
        """Load the model in an archive or artifact dir. `model`: its class (default: the manifest's
        model family in the registry); `config`: the serving settings (default: the dir's
        model-config.yaml `handler:` block, or none); `name`: default the family."""
        model_dir = Path(model_dir)
        family = str(read_manifest(model_dir).get("model", ""))
        cls_ = model or model_class(family)
        config = dict(ArchiveConfig.read(model_dir).handler) if config is None else config
        return cls(cls_.load(model_dir, config, device, name or family), telemetry)

    @property
    def settings(self) -> Any:
        return self.model.settings

    def handle_batch(
        self, requests: Sequence[Request], write: Callable[[Any], Any] | None = None
    ) -> list[Any]:
        """One Reply or RequestError per request, in order; never raises for a request's sake.

        `write`: what each answer becomes instead of its Reply (the model's typed answer, or an
        `Explained`, in; a tensor adapter's outputs or a scoring row out): the answer is then
        serialised once, by the adapter's own form. A failure there is the request's 500."""
        ids = [r.id for r in requests]
        with self.telemetry.stage("preprocess"):
            parsed = [self._parse(r) for r in requests]
        with self.telemetry.stage("inference"):
            answers = self._infer(parsed, ids)
        with self.telemetry.stage("postprocess"):
            return self._reply(answers, ids, write)

    def _write_reply(self, answer: Any) -> Reply:
        if isinstance(answer, Explained):
            return answer.answer.reply()
        return self.model.reply(answer)

    @property
    def explains(self) -> bool:
        return callable(getattr(self.model, "explain", None))

    def _parse(self, request: Request) -> Any:
        try:
            explain = wants_explanation(request)
            if explain and not self.explains:
                raise NotServed(
                    f"{self.model.name} does not explain its answers; POST the same body to "
                    f"/predictions/{self.model.name}"
                )
            parsed = self.model.parse(request)
            return Explain(parsed) if explain else parsed
        except RequestError as err:
            return err
        except Exception:
            log.exception("request %s: parsing failed", request.id)
            return InternalError(request.id)

    def _infer(self, parsed: list[Any], ids: list[str | None]) -> list[Any]:
        """Predictions through `inference`, explanations through `explain`, back in request order."""
        explain = [isinstance(p, Explain) for p in parsed]
        answers: list[Any] = list(parsed)
        if not all(explain):
            idx = [i for i, e in enumerate(explain) if not e]
            ids_ = [ids[i] for i in idx]
            items = budget.apply([parsed[i] for i in idx], self.model.budgets, ids_)
            begin = self.explain_share.clock()
            out = self._run(self.model.inference, items, ids_)
            self.explain_share.record_predictions(begin, self.explain_share.clock())
            for i, a in zip(idx, out, strict=True):
                answers[i] = a
        if any(explain):
            idx = [i for i, e in enumerate(explain) if e]
            items = [parsed[i].request for i in idx]
            if self.explain_share.allows(predictions_waiting=not all(explain)):
                begin = self.explain_share.clock()
                ids_ = [ids[i] for i in idx]
                items = budget.apply(items, self.model.explain_budgets, ids_)  # type: ignore[attr-defined]
                out = self._run(self.model.explain, items, ids_)  # type: ignore[attr-defined]
                self.explain_share.record(begin, self.explain_share.clock())
            else:  # over its share of the worker: refused without running
                refusal = self.explain_share.refusal()
                out = [it if isinstance(it, RequestError) else refusal for it in items]
            for i, a in zip(idx, out, strict=True):
                answers[i] = a if isinstance(a, RequestError) else Explained(a)
        return answers

    def _run(self, call: Any, parsed: list[Any], ids: list[str | None]) -> list[Any]:
        try:
            return _checked(call(parsed), parsed)
        except Exception:
            log.exception(
                "batch of %d: the model call failed; running its requests alone", len(parsed)
            )
        # One request's input may break the batched call: each runs alone, so only its own answer
        # is an error (a lone request's answer is the same as its answer in a batch).
        answers: list[Any] = []
        for item, rid in zip(parsed, ids, strict=True):
            if isinstance(item, RequestError):
                answers.append(item)
                continue
            try:
                [answer] = _checked(call([item]), [item])
            except Exception:
                log.exception("request %s: the model call failed", rid)
                answer = InternalError(rid)
            answers.append(answer)
        return answers

    def _reply(
        self, answers: list[Any], ids: list[str | None], write: Callable[[Any], Any] | None = None
    ) -> list[Any]:
        write = write or self._write_reply
        self.telemetry.batch(len(answers))
        results: list[Any] = []
        answered = []
        for answer, rid in zip(answers, ids, strict=True):
            if not isinstance(answer, RequestError):
                try:
                    results.append(write(answer))
                    if not isinstance(answer, Explained):
                        answered.append(answer)
                    continue
                except Exception:
                    log.exception("request %s: writing the answer failed", rid)
                    answer = InternalError(rid)
            self.telemetry.refused_error(answer, rid)
            results.append(answer)
        try:
            self.model.report(answered, self.telemetry)
        except Exception:  # why: telemetry never turns answered requests into errors
            log.warning("telemetry: report failed", exc_info=True)
        return results


def _checked(answers: Any, parsed: list[Any]) -> list[Any]:
    if not isinstance(answers, list) or len(answers) != len(parsed):
        raise TypeError(f"inference returned {type(answers).__name__}, not {len(parsed)} answers")
    return answers
