"""Reliability and security checks against a real TorchServe.

`python -m reliability` (or `make reliability`) runs the integration suites in
tests/integration/test_reliability_*.py and test_security*.py with a bigger fuzz budget and writes
reports/reliability.md + reports/reliability.json from the figures the tests record.
"""
