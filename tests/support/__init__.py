"""Test helpers that start real servers (TorchServe, moto's S3 server) on free loopback ports."""
