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
from importlib import import_module

from .absolute import (
    LearnedPositionalEncoding,
    SinusoidalPositionalEncoding,
    affine_shift_residual,
    binary_positions,
    integer_positions,
    sinusoidal_positions,
)
from .alibi import ALiBi, LearnedALiBi, alibi_bias, alibi_bias_two_sided, alibi_slopes
from .angles import rope_angles, rope_frequencies
from .attention import attention, causal_linear_attention, causal_mask
from .deberta import deberta_log_bucket, deberta_relative_index, deberta_scores, deberta_terms
from .device import best_device, default_device
from .permutation import equivariance_error, inverse_permutation, permutation_matrix, self_attention
from .relative import (
    ShawRelativePositions,
    T5RelativeBias,
    clipped_relative_positions,
    relative_positions,
    shaw_attention,
    t5_relative_bucket,
)
from .rope import layout_permutation, pair_indices, rope_matrix, rotate_pairs
from .rope_analysis import (
    rope_abel_bound,
    rope_angle_error,
    rope_angle_novelty,
    rope_combination_gap,
    rope_complex_scores,
    rope_decay_bound,
    rope_pair_products,
    rope_partial_sums,
    rope_scores_by_distance,
    rope_wavelengths,
)
from .cope import CoPE, cope_positions
from .scaling import SCALINGS, scaled_rope_frequencies, scaling_options
from .rope_config import rope_from_config, rope_settings
from .rope_inspect import inspect_config, wavelength_figure
from .temperature import attention_temperature
from .xl import rel_shift, xl_relative_sinusoids, xl_score_terms, xl_scores, xl_scores_direct

__all__ = [
    "DecoderConfig",
    "KVCache",
    "POSITIONAL_METHODS",
    "SCALINGS",
    "TinyDecoder",
    "apply_rope_2d",
    "apply_rope_nd",
    "mrope_positions",
    "rope_nd_axes",
    "rope_nd_frequencies",
    "CoPE",
    "cope_positions",
    "attention_temperature",
    "axial_positions",
    "scaled_rope_frequencies",
    "scaling_options",
    "toeplitz_attention",
    "t5_attention",
    "relative_bias_attention",
    "apply_rope_compiled",
    "alibi_attention",
    "ALiBi",
    "LearnedALiBi",
    "LearnedPositionalEncoding",
    "RotaryEmbedding",
    "ShawRelativePositions",
    "SinusoidalPositionalEncoding",
    "T5RelativeBias",
    "affine_shift_residual",
    "alibi_bias",
    "alibi_bias_two_sided",
    "alibi_slopes",
    "apply_rope",
    "attention",
    "binary_positions",
    "causal_linear_attention",
    "causal_mask",
    "clipped_relative_positions",
    "deberta_log_bucket",
    "deberta_relative_index",
    "deberta_scores",
    "deberta_terms",
    "best_device",
    "default_device",
    "equivariance_error",
    "inverse_permutation",
    "integer_positions",
    "layout_permutation",
    "pair_indices",
    "permutation_matrix",
    "rel_shift",
    "relative_positions",
    "rope_from_config",
    "rope_settings",
    "inspect_config",
    "wavelength_figure",
    "diagnose_rope",
    "diagnose_model",
    "rope_angles",
    "rope_frequencies",
    "rope_matrix",
    "rope_abel_bound",
    "rope_angle_error",
    "rope_angle_novelty",
    "rope_combination_gap",
    "rope_complex_scores",
    "rope_decay_bound",
    "rope_pair_products",
    "rope_partial_sums",
    "rope_scores_by_distance",
    "rope_wavelengths",
    "rotate_pairs",
    "self_attention",
    "shaw_attention",
    "swapped_rotary",
    "sinusoidal_positions",
    "t5_relative_bucket",
    "xl_relative_sinusoids",
    "xl_score_terms",
    "xl_scores",
    "xl_scores_direct",
]
__version__ = "0.1.0"

# The modules above the fast paths: posenc_lib/rotary.py picks among posenc_lib/kernels/, and the
# others build on it (fast_attention takes kernels/flex.py on a GPU). Their names load on first use (PEP 562), so that importing the reference,
# ``import posenc_lib.rope``, loads no kernel code (tests/test_rope_fast.py checks it).
_ABOVE_KERNELS = {
    "rotary": ("RotaryEmbedding", "apply_rope", "apply_rope_compiled"),
    "model": ("POSITIONAL_METHODS", "DecoderConfig", "KVCache", "TinyDecoder", "swapped_rotary"),
    "rope2d": ("apply_rope_2d", "axial_positions"),
    "rope_nd": ("apply_rope_nd", "mrope_positions", "rope_nd_axes", "rope_nd_frequencies"),
    "rope_diagnose": ("diagnose_rope", "diagnose_model"),
    "fast_attention": ("alibi_attention", "relative_bias_attention", "t5_attention", "toeplitz_attention"),
}
_HOME = {name: module for module, names in _ABOVE_KERNELS.items() for name in names}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
