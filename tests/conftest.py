"""Shared fixtures live in tests/fixtures/ (one module per area) and are registered here."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = [
    "tests.fixtures.sentiment",
    "tests.fixtures.frequency",
    "tests.fixtures.served",
    "reliability.fixtures",
    "tests.fixtures.s3",
    "tests.fixtures.checkout",
]
