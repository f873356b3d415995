"""oscar-kv: accurate, deployable INT2 KV-cache quantization (OSCAR, arXiv 2605.17757)."""

__version__ = "0.1.0"
