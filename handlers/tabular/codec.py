"""The tabular model's wire contract (both directions) is its kit's, handlers/kits/tabular/:
a record as a JSON object, many as {"records": [...]} or CSV rows; an answer row per record."""

from handlers.kits.tabular import CSV_TYPE, RECORDS_KEY, Answers, read_records  # noqa: F401
