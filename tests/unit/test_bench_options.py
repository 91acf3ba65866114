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


def test_workers_and_protocols_are_comma_separated_and_checked(capsys):
    args = parse_args(["--workers", "1,2", "--protocols", "rest", "--concurrency", "1,16"])
    assert args.worker_counts == [1, 2] and args.protocols == ["rest"] and args.levels == [1, 16]
    assert parse_args([]).worker_counts == []  # the model-config's minWorkers
    with pytest.raises(SystemExit):
        parse_args(["--bodies", "json,protobuf"])
    assert "unknown body kind 'protobuf'" in capsys.readouterr().err


def test_the_oip_comparison_runs_on_the_fp32_sentiment_archive_unless_switched_off(monkeypatch):
    from pathlib import Path

    from bench import __main__ as bench
    from bench import oip

    ran = []
    monkeypatch.setattr(oip, "compare", lambda archive, *a, **k: ran.append(archive) or {"ok": 1})
    monkeypatch.setattr(oip, "OIP_PYTHON", Path(__file__))  # stands for an existing .venv-oip
    archives = {"sentiment_onnx": Path("s.mar"), "sentiment_int8": Path("i.mar")}
    assert parse_args([]).oip_seconds == 20.0
    assert bench.compare_runtimes(parse_args(["--oip-seconds", "0"]), archives) is None
    assert bench.compare_runtimes(parse_args([]), {"frequency_onnx": Path("f.mar")}) is None
    assert ran == []
    assert bench.compare_runtimes(parse_args([]), archives) == {"ok": 1}
    assert ran == [Path("s.mar")]


def test_the_oip_comparisons_torchserve_serves_the_archive_under_its_manifests_name(
    tmp_path, monkeypatch
):
    """`python -m bench` names its archives <model>_<runtime>, and TorchServe registers an archive
    under its manifest's modelName: a server waiting for "sentiment" never saw it READY."""
    import json
    import zipfile

    from bench import oip
    from tests.support import torchserve

    archive = tmp_path / "sentiment_onnx.mar"
    with zipfile.ZipFile(archive, "w") as mar:
        mar.writestr(
            "MAR-INF/MANIFEST.json", json.dumps({"model": {"modelName": "sentiment_onnx"}})
        )
    started = []

    class Server:
        inference_url = "http://127.0.0.1:1"

        def auth(self):
            return {}

        def stop(self):
            pass

    monkeypatch.setattr(
        torchserve, "start_torchserve", lambda work, a: started.append(a) or Server()
    )
    oip._torchserve(archive, tmp_path)
    assert started == [{"sentiment_onnx": archive}]
