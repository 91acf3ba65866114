"""Plain modules behind the sentiment handler: settings, tokenization, request parsing, prediction."""
