"""The worst cases of reliability/costly.py are built per modality kit and chosen by the kits a
model names in its registry line: a model gets them by naming its kit, and costly.py names no
model (tests/integration/test_worst_case.py and test_surface.py send them)."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

from reliability import costly
from tools import registry


def test_the_worst_cases_name_no_model():
    """Guard: costly.py had a generator per model (`digits()`, `sentiment()`, ...) and chose it by
    the model's name, so a fifth model of a kit got none."""
    source = Path(costly.__file__).read_text()
    names = set(registry.names()) - set(costly.KITS)  # "tabular" names a kit and a model
    named = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if (tok.type == tokenize.NAME and tok.string in names)
        or (tok.type == tokenize.STRING and tok.string.strip("\"'") in names)
    ]
    assert not named, f"costly.py names models (line, token): {named}"


@pytest.mark.parametrize("model", registry.names())
def test_every_model_gets_the_worst_cases_of_the_kits_it_names(model):
    spec = registry.get(model)
    assert spec.kits and set(spec.kits) <= set(costly.KITS), spec.kits
    worst = costly.for_model(model)
    expects = {c.expect for c in worst}
    assert costly.ALLOWED in expects and costly.OVER in expects, [repr(c) for c in worst]
    assert any(c.explain for c in worst), "no explanation at its cost limit"


def test_a_signal_model_without_its_frequencies_is_told_what_to_declare():
    config = costly.limits("frequency")
    with pytest.raises(ValueError, match="frequencies and sample_rate"):
        costly.signal(config, costly.Known({}, {}))
