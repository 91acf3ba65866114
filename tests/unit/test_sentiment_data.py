"""Review data: cleaning, a leak-free seeded split, head+tail tokenization and length batches."""

import numpy as np
import pytest

from training.sentiment.data import MIN_TEST_IMDB, clean, load_splits
from training.sentiment.encoding import encode, length_batches, truncate_ids
from training.sentiment.model import load_tokenizer


@pytest.fixture(scope="module")
def splits():
    return load_splits(seed=0)


def test_clean_strips_html_line_breaks_and_squashes_spaces():
    assert clean("Great film.<br /><br />Really  great.") == "Great film. Really great."


def test_split_has_no_review_in_two_parts(splits):
    train, val, test = (set(s.text) for s in (splits.train, splits.validation, splits.test))
    assert not train & val
    assert not train & test
    assert not val & test
    assert len(train) == len(splits.train)  # duplicates were dropped before splitting


def test_test_split_holds_enough_imdb_reviews_of_both_labels(splits):
    imdb = splits.test.source == "imdb"
    assert imdb.sum() >= MIN_TEST_IMDB
    assert set(np.unique(splits.test.label[imdb])) == {0, 1}
    assert (splits.test.source == "rotten_tomatoes").any()


def test_split_is_reproducible_for_a_seed_and_differs_for_another(splits):
    again = load_splits(seed=0)
    other = load_splits(seed=1)
    assert again.test.text == splits.test.text
    assert other.test.text != splits.test.text


def test_training_subset_is_drawn_from_train_only(splits):
    sample = splits.train.sample(300, seed=0)
    assert len(sample) == 300
    assert set(sample.text) <= set(splits.train.text)
    assert not set(sample.text) & set(splits.test.text)


def test_head_tail_truncation_keeps_start_and_end():
    ids = list(range(100))
    assert truncate_ids(ids, 10, head_tokens=4) == [0, 1, 2, 3, 94, 95, 96, 97, 98, 99]
    assert truncate_ids(ids[:5], 10, head_tokens=4) == [0, 1, 2, 3, 4]


def test_encode_bounds_length_and_frames_with_special_tokens():
    tok = load_tokenizer()
    long_review = "terrible start . " * 200 + "but in the end a wonderful film"
    enc = encode(tok, [long_review, "fine"], max_length=32, head_tokens=8)
    assert enc.input_ids.shape == (2, 32)
    assert enc.input_ids[0, 0] == tok.cls_token_id and enc.input_ids[0, -1] == tok.sep_token_id
    # The tail survives truncation: the verdict at the end is still in the tokens.
    assert tok.convert_tokens_to_ids("wonderful") in enc.input_ids[0]
    assert enc.attention_mask[1].sum() == 3  # [CLS] fine [SEP]
    assert np.all(enc.input_ids[1, 3:] == tok.pad_token_id)


def test_length_batches_cover_every_index_once():
    lengths = np.random.default_rng(0).integers(3, 200, size=1001)
    for rng in (None, np.random.default_rng(1)):
        batches = list(length_batches(lengths, 16, rng))
        assert sorted(np.concatenate(batches).tolist()) == list(range(1001))
        assert max(len(b) for b in batches) == 16
