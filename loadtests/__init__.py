"""Locust load tests: `make loadtest` (see loadtests/locustfile.py)."""
