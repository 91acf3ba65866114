"""Frequency extraction: an LSTM that pulls one clean sinusoid out of a noisy mix of four.

`python -m training.frequency --out artifacts/frequency [--config default|tiny]`
"""
