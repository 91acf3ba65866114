"""`python -m bench` takes lists as comma-separated values, like the load test's --models."""

import pytest

from bench.__main__ import parse_args


def test_lists_are_comma_separated():
    args = parse_args(
        ["--models", "sentiment,frequency", "--runtimes", "onnx", "--concurrency", "1,4"]
    )
    assert args.models == ["sentiment", "frequency"]
    assert args.runtimes == ["onnx"]
    assert parse_args(["--bodies", "json,float32"]).bodies == ["json", "float32"]


def test_an_unknown_model_is_a_usage_error_naming_it(capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["--models", "sentiment frequency"])
    assert e.value.code == 2
    assert "unknown model 'sentiment frequency'" in capsys.readouterr().err
