"""Offline batch scoring of a corpus on Ray Data, through the same `ModelService` as serving:
`python -m scoring` (docs/scoring.md)."""
