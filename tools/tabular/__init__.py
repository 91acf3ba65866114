"""The tabular model's tool parts: samples, command-line options, bench feeds."""
