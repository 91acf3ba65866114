"""The Open Inference Protocol (KServe "v2": REST and gRPC) in front of the same `ModelService`
TorchServe serves (handlers/service.py), on KServe's Python model server: docs/oip.md, whose
"Where the code is" says what each module does.

Serving side only: nothing here imports training/, clients/, bench/ or tools.
"""
