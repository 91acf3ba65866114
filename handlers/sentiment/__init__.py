"""The sentiment classifier's serving code: the text kit (handlers/kits/text/) under its name."""
