"""transformers KV cache with OSCAR mixed windows (BF16 sink + INT2 history + BF16 recent)."""

from .layers import FullPrecisionLayer, KiviLayer, MixedWindowLayer, TokenwiseLayer
from .oscar_cache import OscarCache
from .store import RowStore

__all__ = ["FullPrecisionLayer", "KiviLayer", "MixedWindowLayer", "OscarCache", "RowStore", "TokenwiseLayer"]
