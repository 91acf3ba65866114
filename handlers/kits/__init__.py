"""Modality kits: what every model of a modality shares (decoding its inputs safely, pricing a
request before any work, reading it into the graph's input, attributions, the answer), each used
by configuration: a model names its kits in its registry line (handlers/registry.py), and a model
of a kit names its export, its settings and its predictor or model class, and nothing else. The
kits: image/, text/, signal/, tabular/. A kit imports no model and names none."""
