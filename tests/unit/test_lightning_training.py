"""The Lightning side of training, on tiny data: device and precision choice, resuming from a
checkpoint, and the lstm-attention variant (exported, served by the unchanged engine)."""

from __future__ import annotations

import dataclasses

import lightning as L
import numpy as np
import pytest
import torch

from training.common.trainer import TrainerOptions, precision_for, resolved_accelerator
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal
from training.frequency.quality import windows_mode
from training.frequency.train import train, train_signals
from training.sentiment.train import PlannedBatches

# Tiny, and without dropout: nothing random is drawn inside a step, so a resumed run can be
# compared with an uninterrupted one weight for weight.
TINY = dataclasses.replace(CONFIGS["tiny"], steps=40, val_every=20, head_dropout=0.0)


def test_auto_takes_the_cpu_here_and_full_precision_there():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    if not torch.cuda.is_available() and torch.backends.mps.is_available():
        expected = "mps"
    assert resolved_accelerator("auto") == expected
    assert precision_for(TrainerOptions(accelerator="cpu")) == "32-true"
    assert precision_for(TrainerOptions(accelerator="cpu", precision="bf16-mixed")) == "bf16-mixed"


def test_cpu_bf16_only_where_asked_and_where_the_cpu_computes_it(monkeypatch):
    from training.common import trainer

    cpu = TrainerOptions(accelerator="cpu")
    monkeypatch.setattr(trainer, "cpu_has_native_bf16", lambda: True)
    assert precision_for(cpu, cpu_bf16=True) == "bf16-mixed"
    assert precision_for(cpu) == "32-true"  # the frequency LSTM does not ask
    assert precision_for(TrainerOptions(accelerator="cpu", precision="32-true"), True) == "32-true"
    monkeypatch.setattr(trainer, "cpu_has_native_bf16", lambda: False)
    assert precision_for(cpu, cpu_bf16=True) == "32-true"  # emulated bf16 would be slower


def test_sentiment_trains_shorter_than_it_serves_with_the_same_head_share():
    from training.sentiment.config import DEFAULT, TINY
    from training.sentiment.encoding import token_rows
    from training.sentiment.model import load_tokenizer
    from training.sentiment.pipeline import training_rows

    tok = load_tokenizer()
    words = " ".join(f"w{i}" for i in range(400))
    rows = training_rows(tok, [words, "A short one."], DEFAULT)
    served, short = token_rows(
        tok, [words, "A short one."], DEFAULT.max_length, DEFAULT.head_tokens
    )
    assert len(rows[0]) == DEFAULT.train_max_length < len(served)
    assert rows[1] == short  # a review within the training length is untouched
    head = round(DEFAULT.head_tokens * (DEFAULT.train_max_length - 2) / (DEFAULT.max_length - 2))
    # [CLS] + the same first tokens as served + the same last tokens + [SEP]
    assert rows[0][: head + 1] == served[: head + 1]
    assert rows[0][head + 1 :] == served[-(DEFAULT.train_max_length - head - 1) :]
    # never longer than what is exported and served
    assert max(len(r) for r in training_rows(tok, [words], TINY)) == TINY.max_length


def test_devices_take_one_device_and_refuse_several():
    from training.common.trainer import _devices

    assert _devices("auto") == 1 and _devices("1") == 1 and _devices("2,") == [2]
    for several in ("2", "0,1"):
        with pytest.raises(ValueError, match="one device"):
            _devices(several)


def test_planned_batches_skip_what_a_checkpoint_already_trained():
    plan = [np.array([i, i + 1]) for i in range(0, 10, 2)]
    done = {"steps": 0}
    batches = PlannedBatches(plan, lambda: done["steps"])
    assert list(batches) == [b.tolist() for b in plan] and len(batches) == 5
    done["steps"] = 3
    assert list(batches) == [[6, 7], [8, 9]] and len(batches) == 2


class StopAt(L.Callback):
    """Interrupts a run after `step` optimizer steps, as a killed job would (after its checkpoint)."""

    def __init__(self, step: int):
        self.step = step

    def on_train_batch_end(self, trainer, *args):
        if trainer.global_step >= self.step:
            trainer.should_stop = True


def test_resumed_frequency_run_ends_where_an_uninterrupted_one_does(tmp_path):
    signals = train_signals(TINY)
    straight, steps = train(TINY, signals, TrainerOptions(checkpoint_every=10), tmp_path / "a",
                            progress=False)  # fmt: skip
    assert steps == TINY.steps

    opts = TrainerOptions(checkpoint_every=10, resume=True)
    _, stopped = train(TINY, signals, opts, tmp_path / "b", progress=False, callbacks=[StopAt(30)])
    assert stopped == 30 and (tmp_path / "b" / "checkpoints" / "last.ckpt").is_file()
    resumed, steps = train(TINY, signals, opts, tmp_path / "b", progress=False)
    assert steps == TINY.steps  # continued from 30, did not start over
    for (name, a), (_, b) in zip(
        straight.state_dict().items(), resumed.state_dict().items(), strict=True
    ):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5, err_msg=name)


ATTENTION = dataclasses.replace(TINY, arch="lstm-attention", steps=20)


@pytest.fixture(scope="module")
def attention_artifacts(tmp_path_factory):
    """A tiny lstm-attention export, trained once for the tests below."""
    from training.frequency.__main__ import run

    out = tmp_path_factory.mktemp("attention")
    manifest = run(out, ATTENTION, plots=False, progress=False)
    return out, manifest


def _eager_model(out):
    """An eager model with the weights of the exported TorchScript sequence graph."""
    from training.frequency.train import build_model

    model = build_model(ATTENTION)
    scripted = torch.jit.load(str(out / "model.pt"))
    state = {k.removeprefix("model."): v for k, v in scripted.state_dict().items()}
    model.load_state_dict({k: state[k] for k in model.state_dict()})
    return model.eval()


def test_attention_variant_keeps_the_plain_lstm_for_the_stateful_mode(attention_artifacts):
    out, manifest = attention_artifacts
    assert manifest["metrics"]["arch"] == "lstm-attention"
    model = _eager_model(out)
    cfg = ATTENTION
    x = torch.zeros(2, 30, 6)  # blocks: two lock-in products, the one-hot selector
    x[..., 0] = torch.linspace(-1, 1, 30)
    x[..., 1] = torch.linspace(1, -1, 30)
    x[:, :, 3] = 1.0
    h0 = torch.zeros(cfg.layers, 2, cfg.hidden)
    with torch.inference_mode():
        step_out = torch.jit.load(str(out / "step.pt"))(x, h0, h0)[0]
        lstm_features, _ = model.lstm(x, (h0, h0))
        plain = model.out(lstm_features)
        windowed, features = torch.jit.load(str(out / "model.pt"))(x)
        mixed = model.mixer(lstm_features)
    torch.testing.assert_close(step_out, plain, atol=1e-5, rtol=0)
    # The windowed path does go through attention + residual + LayerNorm.
    torch.testing.assert_close(features, mixed, atol=1e-5, rtol=0)
    assert not torch.allclose(features, lstm_features, atol=1e-3)
    assert not torch.allclose(windowed, plain, atol=1e-3)


def test_attention_export_is_served_by_the_unchanged_engine(attention_artifacts):
    from handlers.frequency.engine import FrequencyEngine
    from handlers.frequency.settings import parse_settings
    from handlers.kits.signal.codec import SignalRequest

    out, manifest = attention_artifacts
    cfg = ATTENTION
    assert manifest["parity"]["sequence"]["onnx"] < 1e-4
    settings = parse_settings(manifest, {"mc_samples": 8})
    engine = FrequencyEngine(settings, out)
    signal = make_signal(cfg.signal, cfg.test_seed)
    req = SignalRequest(signal.mixed, cfg.signal.sample_rate, (3.0,), (1,))
    served = engine.windows([req])[0].signal[0]
    model = _eager_model(out)
    want, _ = windows_mode(model, cfg, signal.mixed, (1,))
    want = want[0]
    np.testing.assert_allclose(served, want, atol=1e-4)
