"""Shared fixtures live in tests/fixtures/ (one module per area) and are registered here."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Training run in tests is tracked in a store of the session's own, never the checkout's mlruns.db.
_MLRUNS = tempfile.mkdtemp(prefix="pytest-mlruns-")
os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{_MLRUNS}/mlruns.db"
atexit.register(shutil.rmtree, _MLRUNS, ignore_errors=True)

pytest_plugins = [
    "tests.fixtures.sentiment",
    "tests.fixtures.frequency",
    "tests.fixtures.digits",
    "tests.fixtures.tabular",
    "tests.fixtures.served",
    "tests.fixtures.oip",
    "reliability.fixtures",
    "tests.fixtures.s3",
    "tests.fixtures.checkout",
]
