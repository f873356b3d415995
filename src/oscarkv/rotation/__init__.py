"""Rotations (Hadamard, bit reversal, OSCAR U.H.P), applying them per head, and rotation files."""

from .apply import expand_heads, fold_v_rotation_into_o_proj, rotate, rotate_with_keys, unrotate
from .build import (
    COMPOSITIONS,
    bit_reversal_permutation,
    bit_reverse_indices,
    compose,
    eigh_sorted,
    hadamard,
    key_rescale,
    orthogonality_error,
    oscar_rotation,
    permutation_matrix,
    recover_eigenvectors,
)

__all__ = [
    "COMPOSITIONS",
    "expand_heads",
    "fold_v_rotation_into_o_proj",
    "rotate",
    "rotate_with_keys",
    "unrotate",
    "bit_reversal_permutation",
    "bit_reverse_indices",
    "compose",
    "eigh_sorted",
    "hadamard",
    "key_rescale",
    "orthogonality_error",
    "oscar_rotation",
    "permutation_matrix",
    "recover_eigenvectors",
]

from .files import RotationMismatchError, RotationSet, config_fingerprint, config_hash  # noqa: E402

__all__ += ["RotationMismatchError", "RotationSet", "config_fingerprint", "config_hash"]

from .zoo import import_rotationzoo  # noqa: E402

__all__ += ["import_rotationzoo"]

from .centering import add_value_mean, center, rotated_mean, uncenter, value_mean_bias, value_output_mean  # noqa: E402

__all__ += ["add_value_mean", "center", "rotated_mean", "uncenter", "value_mean_bias", "value_output_mean"]
