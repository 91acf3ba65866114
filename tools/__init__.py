"""Each model's tool parts: what clients, bench, the load tests, the rehearsal and reliability
use and a serving worker never loads (CLI options and requests, bench feeds, rehearsal and
overload traffic, samples, explanation views). It may import handlers, clients and training;
handlers imports nothing of it (import-linter contracts in pyproject.toml), and no archive
carries it (deploy/archive.py)."""
