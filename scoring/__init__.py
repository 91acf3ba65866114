"""Offline batch scoring of a corpus on Ray Data, through the same `ModelService` as serving.

`python -m scoring <model> --input FILE|DIR|s3://... --output DIR` (docs/scoring.md).
"""
