"""Helpers shared by every model's training and export: parity gate, manifest, calibration, plots."""
