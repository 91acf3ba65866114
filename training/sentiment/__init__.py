"""Sentiment model: pretrained MiniLM encoder fine-tuned with a small stochastic head, exported to
TorchScript and ONNX (logits + head features), calibrated, parity-gated and described by a manifest.

Entry point: `python -m training.sentiment --out DIR [--config default|tiny]`.
"""
