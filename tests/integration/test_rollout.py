"""`make rollout` for real (rehearsal/rollout.py): the stable and a candidate tiny tabular archive,
each served the pod's way, behind the rehearsal's HAProxy balancer under Locust load. A good
candidate (the same archive) passes the shadow and every canary step and is reported promoted; a
bad one (its classes named in reverse order: every label flips) is rolled back at the shadow step,
the reason naming label agreement. Neither costs a client request, and the bad one never answers a
client. Short steps and few requests keep it to seconds past the replicas' start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rehearsal import rollout
from tests.support.candidates import labels_swapped

pytestmark = [pytest.mark.integration, pytest.mark.serial]

SHORT = ["--steps", "5,100", "--step-s", "2", "--judge-requests", "20", "--users", "2"]


def _rollout(tmp: Path, stable: Path, candidate: Path) -> tuple[int, dict]:
    code = rollout.main(
        ["tabular", "--stable", str(stable), "--candidate", str(candidate), *SHORT]
        + ["--out", str(tmp / "reports"), "--work", str(tmp / "work")]
    )
    return code, json.loads((tmp / "reports" / "rollout-tabular.json").read_text())


def test_a_good_candidate_is_promoted_and_a_bad_one_rolled_back(
    tabular_archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MODEL_BUCKET", raising=False)  # no bucket: promotion is reported only

    code, good = _rollout(tmp_path / "good", tabular_archive, tabular_archive)
    assert (code, good["outcome"]) == (0, "promoted"), good
    assert [s["step"] for s in good["steps"]] == ["shadow", "canary 5%", "canary 100%"]
    assert all(s["passed"] for s in good["steps"]), good["steps"]
    assert good["steps"][0]["metrics"]["label_agreement"] == 1.0
    assert good["clients"]["failed"] == 0, good["clients"]
    assert good["clients"]["answered_by"]["b"] > 0  # the candidate really took client traffic
    assert "python -m deploy promote tabular" in good["promotion"]["command"]

    bad = labels_swapped(tabular_archive, tmp_path / "bad" / "tabular-bad.mar")
    code, rolled = _rollout(tmp_path / "bad", tabular_archive, bad)
    assert (code, rolled["outcome"]) == (1, "rolled back"), rolled
    assert [s["step"] for s in rolled["steps"]] == ["shadow"]
    assert rolled["reason"].startswith("shadow: label_agreement "), rolled["reason"]
    assert rolled["steps"][0]["metrics"]["label_agreement"] < 0.97
    assert rolled["clients"]["failed"] == 0, rolled["clients"]
    assert rolled["clients"]["requests"] > 0
    assert rolled["clients"]["answered_by"]["b"] == 0  # clients never got the bad answers
    assert rolled["promotion"]["done"] is False
