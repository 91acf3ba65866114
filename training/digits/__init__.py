"""Digits: a small image classifier on scikit-learn's bundled 8x8 handwritten digits.

`python -m training.digits --out artifacts/digits [--config default|tiny] [--arch cnn|resnet]`
"""
