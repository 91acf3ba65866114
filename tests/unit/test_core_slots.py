"""handlers.runtime.CoreSlots / SharedCores: a model's workers on one host share its cores. A lone
worker runs on all of them, a busy one beside another on one, a dead one frees what it held, and
an answer is bitwise the same on one core and on all (so it never depends on the load)."""

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from handlers.errors import ArchiveError
from handlers.frequency.predict import FrequencyPredictor
from handlers.kits.signal.codec import SignalRequest
from handlers.runtime import CoreSlots, SharedCores, TorchScriptRuntime
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal

ROOT = Path(__file__).resolve().parents[2]
KEY = b"a-test-key-shared-by-every-worker"
SHARED = {"runtime": "onnx", "threads": 2, "share_cores": True, "max_samples": 5000}


def test_alone_a_worker_claims_every_core(tmp_path):
    slots = CoreSlots(tmp_path / "model", 2, folder=tmp_path)
    with slots.claim() as held:
        assert held == 2
    with slots.claim() as held:  # and gives them back
        assert held == 2


def test_beside_a_busy_worker_it_claims_one_core_at_once(tmp_path):
    mine = CoreSlots(tmp_path / "model", 2, folder=tmp_path)
    # The other worker holds one core (the first of two): this one takes the second at once.
    with CoreSlots(tmp_path / "model", 1, folder=tmp_path).claim() as theirs:
        assert theirs == 1
        begin = time.monotonic()
        with mine.claim() as held:
            assert held == 1
        assert time.monotonic() - begin < 0.05


def test_with_every_core_busy_it_waits_for_one(tmp_path):
    mine = CoreSlots(tmp_path / "model", 2, folder=tmp_path)
    other = CoreSlots(tmp_path / "model", 2, folder=tmp_path)
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with other.claim():
            holding.set()
            release.wait(5)
            time.sleep(0.2)

    t = threading.Thread(target=hold)
    t.start()
    assert holding.wait(5)
    release.set()
    begin = time.monotonic()
    with mine.claim() as held:
        waited = time.monotonic() - begin
        assert held in (1, 2)
    t.join()
    assert waited >= 0.15


def test_models_do_not_share_cores(tmp_path):
    a = CoreSlots(tmp_path / "a", 2, folder=tmp_path)
    b = CoreSlots(tmp_path / "b", 2, folder=tmp_path)
    with a.claim() as held_a, b.claim() as held_b:
        assert (held_a, held_b) == (2, 2)


def test_a_killed_worker_frees_its_cores(tmp_path):
    code = (
        "import sys, time\n"
        "from handlers.runtime import CoreSlots\n"
        f"slots = CoreSlots({str(tmp_path / 'model')!r}, 2, folder={str(tmp_path)!r})\n"
        "with slots.claim() as held:\n"
        "    print(held, flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"2"
        proc.send_signal(signal.SIGKILL)  # inside its claim: it never unlocks
        proc.wait(10)
        with CoreSlots(tmp_path / "model", 2, folder=tmp_path).claim() as held:
            assert held == 2
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def shared(frequency_artifacts):
    return FrequencyPredictor.from_dir(frequency_artifacts, SHARED, state_key=KEY)


def requests() -> list[SignalRequest]:
    sig = make_signal(CONFIGS["tiny"].signal, seed=7).mixed[:1200].astype(np.float32)
    return [
        SignalRequest(sig, 1000, (1.0, 7.0), (0, 3)),
        SignalRequest(sig[:333], 1000, (3.0,), (1,)),
        SignalRequest(sig[:500], 1000, (5.0, 1.0), (2, 0), start=True),
    ]


def test_an_answer_is_bitwise_the_same_on_one_core_and_on_all(shared, frequency_artifacts):
    engine = shared.engine
    assert isinstance(engine.sequence, SharedCores) and isinstance(engine.step, SharedCores)
    alone = shared.predict(requests())
    ran: list[int] = []
    narrow_run = engine.sequence.narrow.run

    def counting(inputs):
        ran.append(1)
        return narrow_run(inputs)

    engine.sequence.narrow.run = counting  # type: ignore[method-assign]
    try:
        # Another worker of this model holds one of its two cores: this one runs on the other.
        with CoreSlots(frequency_artifacts, 1).claim():
            beside = shared.predict(requests())
    finally:
        del engine.sequence.narrow.run
    assert ran, "the busy case ran on all cores: nothing was compared"
    for a, b in zip(alone, beside, strict=True):
        assert np.array_equal(a.components.signal, b.components.signal)
        assert np.array_equal(a.components.std, b.components.std)


def test_torchscript_runs_each_worker_on_one_core_when_cores_are_shared(frequency_artifacts):
    """Switching runtime: to torchscript must not fail a model-config that shares its cores:
    TorchScript's threads are per process, so each worker runs on one (the shape under load)."""
    predictor = FrequencyPredictor.from_dir(
        frequency_artifacts, SHARED | {"runtime": "torchscript"}, state_key=KEY
    )
    assert isinstance(predictor.engine.sequence, TorchScriptRuntime)
    assert predictor.engine.sequence.threads == 1


@pytest.mark.parametrize("runtime", ["onnx", "onnx-int8"])
def test_a_texts_answer_is_bitwise_the_same_on_one_core_and_on_all(sentiment_artifacts, runtime):
    from handlers.sentiment.predict import SentimentPredictor

    config = {"runtime": runtime, "threads": 2, "share_cores": True}
    predictor = SentimentPredictor.from_dir(sentiment_artifacts, config)
    assert isinstance(predictor.runtime, SharedCores)
    texts = ["A quiet, patient film that earns its ending.", "Two hours I will not get back."]
    feeds = predictor.feed(predictor.encoder.encode(texts))
    wide = predictor.runtime.wide.run(feeds)
    narrow = predictor.runtime.narrow.run(feeds)
    for name in predictor.settings.export.output_names:
        assert np.array_equal(wide[name], narrow[name])
    alone = predictor.predict(texts)
    with CoreSlots(sentiment_artifacts, 1).claim():  # another worker holds a core
        beside = predictor.predict(texts)
    assert alone == beside


def test_slots_where_the_worker_cannot_write_fail_the_load_with_the_reason(tmp_path):
    with pytest.raises(ArchiveError, match="share_cores keeps its locks in TMPDIR"):
        CoreSlots(tmp_path / "model", 2, folder=tmp_path / "missing")
