"""nodes."""
