"""The KServe `Model` serving one archive: a request's tensors → the kit's typed request
(oip/contract.py) → the batcher's workers (oip/batcher.py, each a `ModelService`, as TorchServe's
workers are), which write each answer as its tensors; each refusal the catalogue's (oip/refusals.py), its batch
neighbours answered. Imports KServe (the OIP venv)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kserve
from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

from handlers.archive import ArchiveConfig
from handlers.errors import BadField, RequestError, Unauthorized
from handlers.manifest import read_manifest
from handlers.service import ModelService
from handlers.telemetry import Telemetry
from handlers.tensors import flag
from oip.auth import Token
from oip.batcher import Batcher
from oip.contract import EXPLAIN_PARAMETER, EXPLANATION_OUTPUT, Contract, parameters_of
from oip.loading import worker_devices
from oip.refusals import refused_class, request_id_of


class ServedModel(kserve.Model):
    """One archive over the protocol, loaded as TorchServe loads it (its model-config.yaml's
    `handler:` settings, batch size and delay, workers and queue size): its metadata from its
    tensor contract, `predict` per request. `metrics`: the handlers' Telemetry sink
    (oip/metrics.PrometheusMetrics), None: no metrics; `gpus`: GPUs to spread workers over."""

    def __init__(self, name: str, model_dir: Path, token: Token, metrics: Any, gpus: int) -> None:
        super().__init__(name)
        archive = ArchiveConfig.read(model_dir)
        self.telemetry = Telemetry(metrics, name)
        services = [
            ModelService.from_dir(
                model_dir,
                name=name,
                config=dict(archive.handler),
                device=device,
                telemetry=self.telemetry,
            )
            for device in worker_devices(archive.min_workers, gpus)
        ]
        model = str(read_manifest(model_dir).get("model", name))
        self.contract = Contract(model, services[0].settings)
        self.batcher = Batcher(
            services,
            batch_size=archive.batch_size,
            max_delay_s=archive.max_batch_delay_ms / 1000.0,
            queue_size=archive.job_queue_size,
            write=self.contract.write,
        )
        self.version = str(getattr(services[0].settings, "version", "") or "")
        self.token = token
        self.ready = True

    def get_input_types(self) -> list[dict]:
        return [t.metadata() for t in self.contract.inputs]

    def get_output_types(self) -> list[dict]:
        return [t.metadata() for t in self.contract.outputs]

    async def predict(
        self,
        payload: InferRequest,
        headers: dict[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> InferResponse:
        Refused = refused_class()
        request_id = request_id_of(payload.id, headers)
        try:
            self.token.check(headers)
            if not isinstance(payload, InferRequest):  # a v1 body
                raise BadField(f"this server speaks v2: POST /v2/models/{self.name}/infer")
            wanted = {o.name: o for o in payload.request_outputs or []}
            unknown = sorted(
                set(wanted) - {t.name for t in self.contract.outputs} - {EXPLANATION_OUTPUT}
            )
            if unknown:
                raise BadField(f"unknown output {', '.join(map(repr, unknown))}")
            parameters = parameters_of(payload.parameters)
            explain = flag(parameters, EXPLAIN_PARAMETER)
            arrays = self.contract.read_inputs(list(payload.inputs))
            request = self.contract.request(arrays, parameters, request_id, explain)
        except Unauthorized as err:
            raise Refused(err, request_id) from None
        except RequestError as err:  # the tensors' refusal: counted as the model's own are
            self.telemetry.refused_error(err, request_id)
            raise Refused(err, request_id) from None
        result = await self.batcher.submit(request)
        if isinstance(result, RequestError):
            raise Refused(result, request_id)
        infer_outputs = []
        for out in result:
            if wanted and out.name not in wanted:
                continue
            binary = payload.use_binary_outputs
            # REST: an output may ask for binary data; gRPC: raw outputs iff raw inputs.
            rest = not payload.from_grpc
            if rest and out.name in wanted and wanted[out.name].binary_data is not None:
                binary = bool(wanted[out.name].binary_data)
            tensor = InferOutput(out.name, list(out.data.shape), out.datatype)
            tensor.set_data_from_numpy(out.data, binary_data=binary)
            infer_outputs.append(tensor)
        return InferResponse(
            response_id=payload.id or request_id,
            model_name=self.name,
            infer_outputs=infer_outputs,
            model_version=self.version or None,
            use_binary_outputs=payload.use_binary_outputs,
        )
