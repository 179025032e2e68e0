"""nexa-gauge."""
