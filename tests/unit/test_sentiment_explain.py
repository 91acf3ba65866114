"""Sentiment explanations (Captum over the served runtime): word offsets into the request's text,
sub-word pieces summed into their word, truncated words at 0, signs toward the target, and on a
model where masking a word is exactly deleting it, each attribution is that deletion's effect."""

import numpy as np
import pytest

from handlers.kits.text.explain import TextExplainer, word_spans
from handlers.sentiment.predict import SentimentPredictor

TEXT = "An unbelievably dull, overlong film -- but the cast? Wonderful!"


@pytest.fixture(scope="module")
def predictor(sentiment_artifacts):
    return SentimentPredictor.from_dir(sentiment_artifacts, {"threads": 1}, name="sentiment")


@pytest.mark.parametrize("method", ["ablation", "shapley"])
def test_words_are_the_texts_words_with_their_offsets(predictor, method):
    ex = TextExplainer(predictor, method=method).explain(TEXT)
    assert [w.text for w in ex.words] == [
        "An", "unbelievably", "dull", "overlong", "film", "but", "the", "cast", "Wonderful",
    ]  # fmt: skip
    assert all(TEXT[w.start : w.end] == w.text for w in ex.words)
    assert ex.target in predictor.settings.export.labels and 0 <= ex.probability <= 1
    assert ex.evaluations >= len(ex.words)
    body = ex.to_json()
    assert set(body) >= {"target", "words", "model"} and body["model"]["name"] == "sentiment"


def test_a_word_of_many_pieces_gets_one_attribution(predictor):
    pieces = predictor.encoder.tokenizer.encode("unbelievably", add_special_tokens=False).ids
    assert len(pieces) > 1  # the tokenizer splits it: the explanation must sum them into one word
    ex = TextExplainer(predictor).explain(TEXT)
    assert sum(w.text == "unbelievably" for w in ex.words) == 1


def test_signs_point_toward_the_target(predictor):
    labels = predictor.settings.export.labels
    a = TextExplainer(predictor).explain(TEXT, target=labels[0])
    b = TextExplainer(predictor).explain(TEXT, target=labels[1])
    # Two labels: the log-odds of one are minus the other's, so every word flips sign exactly.
    np.testing.assert_allclose(
        [w.attribution for w in a.words], [-w.attribution for w in b.words], atol=1e-9
    )
    assert any(abs(w.attribution) > 0 for w in a.words)


def test_words_cut_by_truncation_get_nothing(predictor):
    budget = predictor.encoder.budget
    text = " ".join(["film"] * (budget + 40))
    ex = TextExplainer(predictor).explain(text)
    assert ex.truncated and len(ex.words) == budget + 40
    head = predictor.encoder.head_tokens
    middle = ex.words[head + 5 : head + 30]  # dropped by head+tail truncation
    assert all(w.attribution == 0.0 for w in middle)


def test_ablation_is_the_effect_of_deleting_the_word(toy_predictor):
    # The toy model averages word embeddings with no positions: masking a word out of attention
    # is exactly deleting it from the text, so each attribution must equal that deletion's drop.
    text = "good movie but boring plot"
    ex = TextExplainer(toy_predictor, score="probability").explain(text)
    idx = list(toy_predictor.settings.export.labels).index(ex.target)
    for w in ex.words:
        rest = (text[: w.start] + text[w.end :]).strip()
        p = toy_deterministic(toy_predictor, rest)[idx]
        assert w.attribution == pytest.approx(ex.probability - p, abs=1e-5), w.text


def toy_deterministic(predictor, text):
    batch = predictor.encoder.encode([text])
    out = predictor.runtime.run(
        {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask}
    )
    logits = predictor.head.forward(out["features"])[0] / predictor.settings.export.temperature
    z = np.exp(logits - logits.max())
    return z / z.sum()


@pytest.fixture(scope="module")
def toy_predictor(tmp_path_factory):
    from tests.unit.test_sentiment_handler import write_toy_artifacts

    out = write_toy_artifacts(tmp_path_factory.mktemp("toy"))
    return SentimentPredictor.from_dir(out, {"threads": 1}, name="sentiment")


def test_word_spans_split_on_whitespace_and_punctuation():
    assert word_spans("it's--fine") == [(0, 2), (3, 4), (6, 10)]


def test_hierarchical_takes_at_most_its_passes_whatever_the_length(predictor):
    explainer = TextExplainer(predictor, passes=12)
    text = " ".join(["a dull film but a wonderful cast"] * 60)  # 420 words, past the window
    assert explainer.cost(text) == 12
    ex = explainer.explain(text)
    assert ex.method == "hierarchical" and ex.evaluations <= 12
    assert ex.truncated and any(w.attribution != 0 for w in ex.words)
    # Leave-one-word-out would have priced and run a pass per word.
    assert TextExplainer(predictor, "ablation").cost(text) == 421


def test_hierarchical_is_leave_one_word_out_on_a_short_text(predictor):
    a = TextExplainer(predictor).explain(TEXT)
    b = TextExplainer(predictor, "ablation").explain(TEXT)
    assert [w.attribution for w in a.words] == [w.attribution for w in b.words]
    assert a.evaluations == len(a.words) + 1


def test_hierarchical_refines_the_groups_that_matter_and_shares_the_rest(toy_predictor):
    # 10 words, the toy window's whole content: groups of 4, 4 and 2 (3 passes), then 4 passes
    # for the words of the group that moved the score most. On the toy model masking is
    # deleting, so each number is a deletion's effect.
    text = "bad awful boring plot good great fine film dull bad"
    explainer = TextExplainer(toy_predictor, score="probability", passes=8)
    ex = explainer.explain(text)
    assert ex.evaluations <= 8 and not ex.truncated
    idx = list(toy_predictor.settings.export.labels).index(ex.target)
    words = [w.text for w in ex.words]
    assert len(words) == 10

    def drop(gone: set[int]) -> float:
        rest = " ".join(w for i, w in enumerate(words) if i not in gone)
        return ex.probability - toy_deterministic(toy_predictor, rest)[idx]

    groups = [range(0, 4), range(4, 8), range(8, 10)]
    effects = [drop(set(g)) for g in groups]
    refined = max((g for g in groups if len(g) <= 4), key=lambda g: abs(effects[groups.index(g)]))
    for g, effect in zip(groups, effects, strict=True):
        for i in g:
            want = drop({i}) if g is refined else effect / len(g)
            assert ex.words[i].attribution == pytest.approx(want, abs=1e-5), (words[i], g)
