"""The tabular kit: records in as JSON objects or CSV rows, checked against the feature schema
training learned, encoded for the graph, priced before they run, and explained per feature.

A model of this modality names its schema in its manifest (`Schema.to_block`, written by training
from the records it trained on: each feature's name, type, the range or categories seen, whether a
record may leave it out) and takes everything else from here:

- the schema (schema.py): every violation of a record is named in its 400 (`BadField`), field by
  field: an unknown field, a missing required one, a number that is not a finite number, a category
  never seen; the encoding: a number is placed where it lies in its training range,
  (value - low) / (high - low), so the range seen is [0, 1]; values past it are kept but clipped at
  `margin` ranges beyond (the graph was trained to be unsure out there: a value a million ranges
  out reads as one `margin` out), and each record's `out_of_range` lists the features it has
  outside the range seen; a category is one-hot; a missing optional feature takes its training
  mean (or most frequent category);
- bodies and answers (records.py): one record as a JSON object `{"feature": value, ...}`, many as
  `{"records": [{...}, ...]}` (answered with a list), or `text/csv` with a header row and one row
  per record (always a list); the cost: a prediction costs its records (`Records.cost`), an
  explanation its records times the forward passes per record (`Attributor.passes`), both known
  once the body is read and before any inference, so budgets refuse past them without running;
- the export block and the serving knobs (settings.py);
- the lifecycle part (model.py): one runtime call per batch, MC-dropout spread from the head, the
  distance from training's records (distance.py), explanations;
- attributions (explain.py): Captum over the served runtime's forward pass, one feature (all its
  one-hot columns) at a time against its training baseline.

This module re-exports what the kit's users import (the model's codec and tensor contract,
training, the kit's tests); it imports no runtime.
"""

from handlers.kits.tabular import distance
from handlers.kits.tabular.explain import Attributor, log_odds
from handlers.kits.tabular.records import (
    answered,
    explanation_budget,
    read_records,
    records_budget,
    rows_of,
)
from handlers.kits.tabular.schema import CATEGORY, Schema

__all__ = [
    "CATEGORY",
    "Attributor",
    "Schema",
    "answered",
    "distance",
    "explanation_budget",
    "log_odds",
    "read_records",
    "records_budget",
    "rows_of",
]
