"""Integrations with model libraries (transformers: the OSCAR attention path)."""
