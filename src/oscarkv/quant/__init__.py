"""INT2/INT4 KV quantization format (torch reference) and memory accounting."""

from .bits import effective_bits_per_element, int_region_bits, kv_cache_bytes, mixed_bits_per_element
from .format import (
    QuantConfig,
    QuantizedRows,
    clamp_rows,
    clip_index,
    clip_rows,
    dequantize,
    fake_quantize,
    group_scale_zero,
    pack_codes,
    quantize,
    storage_dtype,
    unpack_codes,
)

__all__ = [
    "QuantConfig",
    "QuantizedRows",
    "clamp_rows",
    "clip_index",
    "clip_rows",
    "dequantize",
    "effective_bits_per_element",
    "fake_quantize",
    "group_scale_zero",
    "int_region_bits",
    "kv_cache_bytes",
    "mixed_bits_per_element",
    "pack_codes",
    "quantize",
    "storage_dtype",
    "unpack_codes",
]
