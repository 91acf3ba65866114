"""The manifest's `handler` block is one contract per model: training writes it from an export
dataclass (`TextExport`, `FrequencyExport`) and serving reads it back through the same class.
Built from training's own functions, without training."""

import json
from dataclasses import fields

import pytest

from handlers.errors import ArchiveError
from handlers.frequency.predict import FrequencyPredictor
from handlers.frequency.settings import FrequencyExport
from handlers.frequency.settings import parse_settings as parse_frequency
from handlers.kits.text.settings import TextExport
from handlers.sentiment.predict import SentimentPredictor
from handlers.sentiment.settings import parse_settings as parse_sentiment
from training.frequency.__main__ import handler_settings as frequency_export
from training.frequency.config import CONFIGS
from training.sentiment.config import TINY
from training.sentiment.pipeline import handler_export as sentiment_export

VERSION = "2026.11.26-000000-abc"


def _written(block: dict) -> dict:
    """The block as manifest.json stores it and a handler reads it back."""
    return json.loads(json.dumps({"version": VERSION, "handler": block}))


def _sentiment_block() -> dict:
    return sentiment_export(TINY, temperature=1.7, pad_token_id=3, feature_dim=384).to_block()


def _frequency_block() -> dict:
    return frequency_export(CONFIGS["tiny"]).to_block()


def test_sentiment_block_from_training_is_what_serving_parses():
    export = sentiment_export(TINY, temperature=1.7, pad_token_id=3, feature_dim=384)
    manifest = _written(export.to_block())
    assert TextExport.from_block(manifest["handler"]) == export
    s = parse_sentiment(manifest, {})
    assert (s.export.input_names, s.export.output_names) == (
        export.input_names,
        export.output_names,
    )
    assert s.export.labels == ("negative", "positive") and s.export.temperature == 1.7
    assert s.max_length == TINY.max_length and s.export.kept_head() == TINY.head_tokens
    assert (s.export.pad_token_id, s.export.feature_dim) == (3, 384)
    assert (s.export.tokenizer, s.export.head) == ("tokenizer/tokenizer.json", "head.npz")
    assert s.version == VERSION


def test_frequency_block_from_training_is_what_serving_parses():
    cfg = CONFIGS["tiny"]
    export = frequency_export(cfg)
    manifest = _written(export.to_block())
    assert FrequencyExport.from_block(manifest["handler"]) == export
    for runtime, step_file in (("onnx", "step.onnx"), ("torchscript", "step.pt")):
        s = parse_frequency(manifest, {"runtime": runtime})
        assert (s.window, s.sample_rate) == (cfg.window, cfg.signal.sample_rate)
        assert s.frequencies == tuple(cfg.signal.frequencies)
        assert (s.layers, s.hidden, s.head_file) == (cfg.layers, cfg.hidden, "head.npz")
        assert s.step.filename == step_file and s.sequence.filename is None
        assert s.step.inputs == ("signal", "h0", "c0") and s.sequence.inputs == ("signal",)
        assert s.version == VERSION


def test_the_block_keys_are_the_export_fields_and_nothing_else():
    """Every key training writes has a field that serving reads (no written-but-ignored keys)."""
    assert set(_sentiment_block()) == {f.name for f in fields(TextExport)}
    assert set(_frequency_block()) == {f.name for f in fields(FrequencyExport)}


@pytest.mark.parametrize(
    "key", ["input_names", "output_names", "labels", "max_length"], ids=lambda k: k
)
def test_sentiment_block_missing_a_required_key_fails_naming_it(key):
    block = _sentiment_block()
    del block[key]
    with pytest.raises(ArchiveError, match=f"no '{key}'"):
        parse_sentiment(_written(block), {})


@pytest.mark.parametrize(
    "key", ["window", "sample_rate", "frequencies", "hidden", "layers", "sequence", "step"]
)
def test_frequency_block_missing_a_required_key_fails_naming_it(key):
    block = _frequency_block()
    del block[key]
    with pytest.raises(ArchiveError, match=f"no '{key}'"):
        parse_frequency(_written(block), {})


@pytest.mark.parametrize(
    ("model", "change", "words"),
    [
        ("sentiment", {"head_tokenz": 8}, "unknown keys in the sentiment manifest handler block"),
        ("sentiment", {"labels": "negative,positive"}, "manifest labels"),
        ("sentiment", {"labels": ["only"]}, "at least two labels"),
        ("sentiment", {"temperature": "warm"}, "manifest temperature"),
        ("sentiment", {"pad_token_id": -1}, "manifest pad_token_id"),
        ("sentiment", {"feature_dim": 0}, "manifest feature_dim"),
        ("sentiment", {"tokenizer": ""}, "manifest tokenizer"),
        ("sentiment", {"input_names": ["input_ids"]}, "two names each"),
        ("frequency", {"arch": "lstm"}, "unknown keys in the frequency manifest handler block"),
        ("frequency", {"frequencies": ["1Hz"]}, "manifest frequencies"),
        ("frequency", {"window": 0}, "manifest window"),
        ("frequency", {"step": {"inputs": ["signal"], "outputs": ["output"]}}, "no 'files'"),
        ("frequency", {"sequence": {"inputs": "signal", "outputs": ["o"]}}, "sequence.inputs"),
        ("frequency", {"head": None}, "manifest head"),
    ],
)
def test_bad_or_unknown_export_key_fails_naming_it(model, change, words):
    block = (_sentiment_block if model == "sentiment" else _frequency_block)() | change
    parse = parse_sentiment if model == "sentiment" else parse_frequency
    with pytest.raises(ArchiveError) as e:
        parse(_written(block), {})
    assert words in str(e.value) and "KeyError" not in str(e.value)


def test_a_runtime_the_step_graph_has_no_file_for_fails_naming_it():
    block = _frequency_block()
    block["step"]["files"] = {"onnx": "step.onnx"}
    with pytest.raises(ArchiveError, match="step.files has no 'torchscript'"):
        parse_frequency(_written(block), {"runtime": "torchscript"})


def test_both_predictors_have_one_loading_shape():
    """Same constructor and from_dir parameters; each reads its settings with its own parser."""
    import inspect

    def params(fn, skip=()):
        return [p for p in inspect.signature(fn).parameters if p not in skip]

    assert params(SentimentPredictor.from_dir) == params(FrequencyPredictor.from_dir)
    assert params(SentimentPredictor.__init__) == params(
        FrequencyPredictor.__init__, skip=("state_key",)
    )
    assert SentimentPredictor.parse_settings is parse_sentiment
    assert FrequencyPredictor.parse_settings is parse_frequency
