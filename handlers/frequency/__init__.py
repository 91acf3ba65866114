"""Plain modules of the frequency handler: settings, wire codec, windowing, engine (runtime calls
and the std band), the client-carried stream state, and the predictor that ties them together."""
