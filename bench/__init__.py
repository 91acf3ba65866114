"""Serving benchmark: `make bench` / `python -m bench --help`."""
