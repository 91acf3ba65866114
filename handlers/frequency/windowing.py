"""Windows and their overlap-add: the signal kit's (handlers/kits/signal/windowing.py), by the
names training imports."""

from handlers.kits.signal.windowing import SKEW, num_windows, split, stitch, taper

__all__ = ["SKEW", "num_windows", "split", "stitch", "taper"]
