"""The Open Inference Protocol (KServe "v2": REST and gRPC) in front of the same `ModelService`
TorchServe serves (handlers/service.py), on KServe's Python model server (docs/oip.md).

- `oip.contract`: tensors in → the kit's typed request (`Contract.request`, the one place a
  `Request` is built), its typed answer → tensors out, and each model's metadata, all from the model's tensor contract
  (handlers/<name>/oip.py, found through the registry);
- `oip.batcher`: many clients' requests → the model's batched call (the archive's batchSize,
  maxBatchDelay, workers and queue size);
- `oip.model`: the KServe `Model` per registered model (`oip.loading`: its archive and its
  workers' devices);
- `oip.refusals`: each refusal's REST status and body and gRPC code, from the catalogue
  (handlers/errors.py); `oip.middleware`: what is refused before KServe reads a request (routes,
  body limit, token, the protocol's fields: `oip.edge`); `oip.auth`: the bearer token;
- `oip.kserve_compat`: every change made to KServe's own code, for the one release it was written
  for; `oip.app`: the server assembled; `oip.cli`: `python -m oip`.

Serving side only: nothing here imports training/, clients/, bench/ or tools.
"""
