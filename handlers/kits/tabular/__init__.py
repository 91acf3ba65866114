"""The tabular kit: records in as JSON objects or CSV rows, checked against the feature schema
training learned, encoded for the graph, priced before they run, and explained per feature.

A model of this modality names its schema in its manifest (`Schema.to_block`, written by training
from the records it trained on) and takes everything else from here: the schema and the encoding
(schema.py), bodies, answers and the cost of a request (records.py), the export block and the
serving knobs (settings.py), the lifecycle part (model.py), the distance from training's records
(distance.py) and per-feature attributions (explain.py).

`Schema` is re-exported for training; this module imports no runtime.
"""

from handlers.kits.tabular.schema import Schema

__all__ = ["Schema"]
