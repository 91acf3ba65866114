"""The text kit: tokenizer loading from the archive and head+tail truncation (tokenize.py); the
texts a request sends, checked (inputs.py); the export block and the serving knobs (settings.py);
MC-dropout classification (classifier.py); the lifecycle part with its cost model (model.py:
tokens per batch, token-passes per explanation); word spans and word or group attributions
(explain.py); the JSON contract, the server's side (codec.py); the tensor contract, texts as
BYTES (oip.py). Its client's side, with the HTML view of an explanation, is clients/kits/text.py."""
