"""Offline calibration: capture q/k/v, streaming covariances, OSCAR rotations, clip ratios, Lloyd-Max levels."""

from .capture import AttentionDims, attention_dims, capture_attention, capture_qkv
from .clip import DEFAULT_CLIP_GRID, DEFAULT_CLIP_K, DEFAULT_CLIP_V
from .core import LEVELS, calibrate, make_batches
from .inspect import format_inspect, inspect_rotations, plot_spectra
from .lloyd import fit_levels, fit_layer_levels

__all__ = [
    "AttentionDims",
    "DEFAULT_CLIP_GRID",
    "DEFAULT_CLIP_K",
    "DEFAULT_CLIP_V",
    "LEVELS",
    "attention_dims",
    "calibrate",
    "capture_attention",
    "capture_qkv",
    "fit_layer_levels",
    "fit_levels",
    "format_inspect",
    "inspect_rotations",
    "plot_spectra",
    "make_batches",
]
