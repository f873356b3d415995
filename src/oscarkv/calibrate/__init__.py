"""Offline calibration: capture q/k/v, streaming covariances, OSCAR rotations, clip ratios, Lloyd-Max levels."""

from .capture import AttentionDims, attention_dims, capture_attention, capture_qkv
from .clip import DEFAULT_CLIP_GRID, DEFAULT_CLIP_K, DEFAULT_CLIP_V
from .core import LEVELS, REL_ERROR_LIMIT, CalibrationStats, build_rotations, calibrate, collect_stats, make_batches, quality_warning
from .inspect import format_inspect, inspect_rotations
from .lloyd import fit_levels, fit_layer_levels

__all__ = [
    "AttentionDims",
    "DEFAULT_CLIP_GRID",
    "DEFAULT_CLIP_K",
    "DEFAULT_CLIP_V",
    "LEVELS",
    "attention_dims",
    "CalibrationStats",
    "build_rotations",
    "calibrate",
    "collect_stats",
    "capture_attention",
    "capture_qkv",
    "fit_layer_levels",
    "fit_levels",
    "format_inspect",
    "inspect_rotations",
    "make_batches",
    "quality_warning",
    "REL_ERROR_LIMIT",
]
