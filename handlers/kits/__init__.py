"""Modality kits: what every model of a modality shares (decoding its inputs safely, pricing a
request before any work, reading it into the graph's input, attributions, the answer), each used
by configuration: a model of the kit names its export, its settings and its predictor, and nothing
else (handlers/kits/image/: handlers/digits/ is built on it)."""
