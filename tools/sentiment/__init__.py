"""The sentiment model's tool parts (tools/__init__.py); its serving code is handlers/sentiment/."""
