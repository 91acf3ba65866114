"""The image kit: safe decoding of PNG/JPEG/WebP/base64/JSON grids, dimensions read and priced
from the headers before decoding (decode.py); the polarity convention, levels and framing, and
resizing to the graph's input (reading.py); the export block and the serving knobs (settings.py);
MC-dropout classification (classifier.py); the lifecycle part with its cost model (model.py);
pixel attributions (explain.py); the tensor contract (oip.py)."""
