"""The Open Inference Protocol (KServe "v2": REST and gRPC) in front of the same `ModelService`
TorchServe serves (handlers/service.py), on KServe's Python model server (docs/oip.md).

- `oip.contract`: tensors in → the model's own request (`to_request`, the one place a `Request` is
  built), its answer → tensors out, and each model's metadata, all from the model's tensor contract
  (handlers/<name>/oip.py, found through the registry);
- `oip.batcher`: many clients' requests → the model's batched call (the archive's batchSize,
  maxBatchDelay, workers and queue size);
- `oip.server`: the KServe `Model` per registered model, per-request statuses over REST and gRPC,
  token auth, and `python -m oip`.

Serving side only: nothing here imports training/, clients/, bench/ or tools.
"""
