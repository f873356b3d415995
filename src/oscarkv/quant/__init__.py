"""INT2/INT4 KV quantization format (torch reference) and memory accounting."""

from .bits import effective_bits_per_element, int2_len, int_region_bits, kv_cache_bytes, mixed_bits_per_element
from .format import (
    QuantConfig,
    QuantizedRows,
    clamp_rows,
    clip_index,
    clip_rows,
    dequantize,
    fake_quantize,
    group_scale_zero,
    log8_top,
    pack_codes,
    quantize,
    scale_zero_values,
    storage_dtype,
    unpack_codes,
)
from .kivi import dequantize_key_blocks, fake_quantize_key_blocks, quantize_key_blocks

__all__ = [
    "QuantConfig",
    "QuantizedRows",
    "clamp_rows",
    "clip_index",
    "clip_rows",
    "dequantize",
    "dequantize_key_blocks",
    "effective_bits_per_element",
    "fake_quantize",
    "fake_quantize_key_blocks",
    "group_scale_zero",
    "log8_top",
    "int2_len",
    "int_region_bits",
    "kv_cache_bytes",
    "mixed_bits_per_element",
    "pack_codes",
    "quantize",
    "quantize_key_blocks",
    "scale_zero_values",
    "storage_dtype",
    "unpack_codes",
]
