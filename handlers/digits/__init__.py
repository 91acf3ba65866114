"""The digits image classifier's serving code: settings, pixels, codec, predictor."""
