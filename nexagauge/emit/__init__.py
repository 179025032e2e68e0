"""emit."""
