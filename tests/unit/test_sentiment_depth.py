"""The encoder depth option (training/sentiment/config.at_depth, the CLI's --encoder-layers): the
exported graph runs exactly the first k MiniLM layers, the frozen lower layers leave the top one
trainable, and `--floors report` records a miss instead of stopping the run."""

from __future__ import annotations

import json
import re
from argparse import Namespace
from dataclasses import replace
from pathlib import Path

import onnx
import pytest

from training.common.floors import Floor, floor_report
from training.sentiment.__main__ import chosen_config, main
from training.sentiment.config import DEFAULT, ENCODER_LAYERS, TINY, at_depth
from training.sentiment.export import export_onnx
from training.sentiment.model import build_model
from training.sentiment.pipeline import run

LAYER = re.compile(r"encoder[./]layer\.(\d+)[./]")


def onnx_layers(path: Path) -> set[int]:
    """The encoder layer indices the exported ONNX graph holds weights of."""
    graph = onnx.load(str(path)).graph
    names = [t.name for t in graph.initializer] + [n.name for n in graph.node]
    return {int(m.group(1)) for name in names if (m := LAYER.search(name))}


def test_at_depth_keeps_the_top_layer_trainable():
    assert at_depth(DEFAULT, 4).encoder_layers == 4
    assert at_depth(DEFAULT, 4).frozen_layers == 3 == DEFAULT.frozen_layers
    three = at_depth(DEFAULT, 3)
    assert (three.encoder_layers, three.frozen_layers, three.name) == (3, 2, "default-3-layers")
    assert DEFAULT.encoder_layers == 5  # chosen on the selection split (training.sentiment.choose)
    assert at_depth(DEFAULT, 5) == DEFAULT
    six = at_depth(DEFAULT, ENCODER_LAYERS)  # all of MiniLM-L6's layers, still three frozen
    assert (six.encoder_layers, six.frozen_layers, six.name) == (6, 3, "default-6-layers")
    for bad in (0, ENCODER_LAYERS + 1):
        with pytest.raises(ValueError, match="encoder layers"):
            at_depth(DEFAULT, bad)


def test_the_command_line_sets_the_depth_and_the_floor_mode(capsys):
    cfg = chosen_config(Namespace(config="default", encoder_layers=3, floors="report"))
    assert (cfg.encoder_layers, cfg.frozen_layers, cfg.enforce_floors) == (3, 2, False)
    assert (
        chosen_config(Namespace(config="default", encoder_layers=None, floors="enforce")) == DEFAULT
    )
    with pytest.raises(SystemExit):  # a model below its floors is never registered
        main(["--out", "unused", "--floors", "report"])
    assert "--floors report needs --no-track" in capsys.readouterr().err


def test_the_exported_graph_has_k_layers(tmp_path, layers=3):
    cfg = at_depth(replace(TINY, encoder_layers=None), layers)
    model = build_model(cfg)
    assert len(model.encoder.encoder.layer) == layers
    trainable = [
        any(p.requires_grad for p in layer.parameters()) for layer in model.encoder.encoder.layer
    ]
    assert trainable == [i >= cfg.frozen_layers for i in range(layers)]
    export_onnx(model, tmp_path / "model.onnx", model.encoder.config.vocab_size, 0)
    assert onnx_layers(tmp_path / "model.onnx") == set(range(layers))


def test_the_tiny_artifacts_export_one_layer(sentiment_artifacts):
    assert onnx_layers(sentiment_artifacts / "model.onnx") == {0}


def test_a_reported_floor_says_missed_without_raising():
    floors = (
        Floor("acc", 0.90, at_least=True, what="accuracy"),
        Floor("ece", 0.03, at_least=False, what="ECE"),
        Floor("off", None, at_least=True, what="unchecked"),
    )
    report = floor_report({"acc": 0.8940, "ece": 0.0083, "off": 0.0}, floors)
    assert report == {
        "acc": {"value": 0.8940, "floor": 0.90, "at_least": True, "met": False},
        "ece": {"value": 0.0083, "floor": 0.03, "at_least": False, "met": True},
    }


def test_a_report_run_writes_the_export_below_its_floors(tmp_path):
    """Unreachable floors in report mode: the run finishes, says which floors it missed, and
    its served export runs the two layers asked for."""
    cfg = replace(at_depth(TINY, 2), min_imdb_accuracy=0.999, max_ece=0.0, enforce_floors=False)
    manifest = run(tmp_path, cfg)
    floors = json.loads((tmp_path / "metrics.json").read_text())["quality_floors"]
    assert floors["test_accuracy_imdb"]["met"] is False
    assert floors["test_accuracy_imdb"]["floor"] == 0.999
    assert floors["ece_after"]["met"] is False
    assert manifest["metrics"]["quality_floors"] == floors
    assert onnx_layers(tmp_path / "model.onnx") == {0, 1}
