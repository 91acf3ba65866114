"""The signal kit: JSON and raw float32 signal requests and answers, with their headers (codec.py);
windowing and overlap-add (windowing.py); stateful streams whose state the client carries in a
signed envelope (state.py: the key, signing, verification, expiry by key and model version; what a
state holds is the model's); the kit's knobs and exported graphs (settings.py); the predictor over
a model's engine (predict.py); the lifecycle part with its cost model, samples x frequencies x
passes priced before running (model.py); block attributions (explain.py); the tensor contract
(oip.py)."""
