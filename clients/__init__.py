"""REST and gRPC clients for the served models: `python -m clients --help`."""
