"""The encoder-runtime rule: adopt only >= 1.2x ONNX Runtime int8 AND through the int8 gate."""

from __future__ import annotations

from bench.runtime_choice import KEEP, Candidate, choose_runtime


def test_a_faster_runtime_that_fails_the_gate_is_refused():
    choice = choose_runtime([Candidate("openvino-int8", 2.0, ("accuracy 1.2 points below",))])
    assert choice.runtime is None
    assert choice.decision == KEEP
    assert "gate refused" in choice.why["openvino-int8"]


def test_a_gate_passing_runtime_under_1_2x_is_refused():
    choice = choose_runtime([Candidate("openvino-f32", 1.19, ())])
    assert choice.runtime is None
    assert "under 1.20x" in choice.why["openvino-f32"]


def test_an_unmeasured_runtime_is_refused():
    assert choose_runtime([Candidate("ctranslate2-int8", None, ())]).runtime is None


def test_the_fastest_passing_runtime_is_adopted():
    choice = choose_runtime(
        [
            Candidate("openvino-f32", 1.25, ()),
            Candidate("openvino-int8", 1.6, ()),
            Candidate("openvino-bf16", 3.0, ("ECE 0.03 above 0.02",)),
        ]
    )
    assert choice.runtime == "openvino-int8"
    assert choice.decision == "adopt openvino-int8"
    assert choice.why["openvino-f32"].startswith("passes")
