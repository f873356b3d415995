"""INT2/INT4 KV quantization format (torch reference) and memory accounting."""

from .bits import effective_bits_per_element, int_region_bits, kv_cache_bytes
from .format import (
    QuantConfig,
    QuantizedRows,
    clip_rows,
    dequantize,
    fake_quantize,
    pack_codes,
    quantize,
    unpack_codes,
)

__all__ = [
    "QuantConfig",
    "QuantizedRows",
    "clip_rows",
    "dequantize",
    "effective_bits_per_element",
    "fake_quantize",
    "int_region_bits",
    "kv_cache_bytes",
    "pack_codes",
    "quantize",
    "unpack_codes",
]
