"""Plain modules of the frequency handler: settings, wire codec, windowing, streaming state, engine."""
