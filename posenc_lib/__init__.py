"""posenc_lib: positional encodings for transformers, one formula in one place.

The library behind the posenc notebooks (``notebooks/``): each notebook narrates an
idea and calls the function here that holds its formula.

Names used throughout:
  n          number of positions             d          feature (head) dimension
  base       frequency base (10000)          inv_freq   theta_j = base**(-2j/d), j counts pairs
  positions  integer positions m, n          num_heads  attention heads H
  q_len      number of queries (index i)     k_len      number of keys (index j)
Sequence tensors are (..., seq, d), so (batch, heads, seq, head_dim) works.
Functions that create tensors take ``device=`` (and ``dtype=``); all others follow their
input's device and dtype. Nothing here hard-codes a device: see ``default_device``.
"""
from .absolute import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    binary_positions,
    integer_positions,
    sinusoidal_positions,
)
from .alibi import ALiBi, alibi_bias, alibi_slopes
from .angles import rope_angles, rope_frequencies
from .attention import attention, causal_mask
from .device import default_device
from .relative import (
    ShawRelativePositions,
    T5RelativeBias,
    clipped_relative_positions,
    relative_positions,
    shaw_attention,
    t5_relative_bucket,
)
from .rope import RotaryEmbedding, apply_rope, layout_permutation, pair_indices, rope_matrix, rotate_pairs

__all__ = [
    "ALiBi",
    "LearnedPositionalEncoding",
    "RotaryEmbedding",
    "ShawRelativePositions",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "attention",
    "binary_positions",
    "causal_mask",
    "clipped_relative_positions",
    "default_device",
    "integer_positions",
    "layout_permutation",
    "pair_indices",
    "relative_positions",
    "rope_angles",
    "rope_frequencies",
    "rope_matrix",
    "rotate_pairs",
    "shaw_attention",
    "sinusoidal_positions",
    "t5_relative_bucket",
]
__version__ = "0.1.0"
