"""Context extension for RoPE: change the frequencies so a model reaches past its training length.

A RoPE model trained on contexts of ``original_max_position`` tokens has only seen
angles m * theta_j with m below that length. To run it on ``factor`` times longer
inputs without retraining, each method changes the inverse frequencies theta_j:

  "none"    theta_j unchanged (plain RoPE)
  "linear"  position interpolation (Chen et al. 2023, kaiokendev): theta_j / factor, so
            position m gets the angle that m / factor had during training
  "ntk"     NTK-aware scaling (bloc97, 2023): a larger base,
            base' = base * factor**(d / (d - 2)); the fastest pair is untouched, the
            slowest is divided by exactly ``factor``
  "dynamic" dynamic NTK (emozilla, 2023): "ntk" with a factor that grows with the
            current length seq_len, so short inputs keep the original frequencies
  "yarn"    YaRN (Peng et al. 2023): pairs that turn many times over the original
            context keep theta_j, pairs that turn less than once are interpolated
            (theta_j / factor), a linear ramp in between; plus an attention factor
            0.1 ln(factor) + 1 on q and k
  "llama3"  Llama 3.1's wavelength bands: wavelengths shorter than
            original_max_position / high_freq_factor are kept, longer than
            original_max_position / low_freq_factor are divided by factor, smooth in between
  "longrope" LongRoPE (Ding et al. 2024; Phi-3): every pair divided by its own searched
            factor, one list for inputs up to original_max_position and another above it;
            attention factor sqrt(1 + ln s / ln L0)
  "proportional" Gemma 4: the first partial_rotary_factor * d / 2 pairs keep the frequencies
            of the full head dimension, the others get frequency 0 (they carry no position)

Every variant is a small function in the ``SCALINGS`` registry with one signature,
and each starts from ``rope_frequencies`` and modifies its output, as Hugging Face's
``ROPE_INIT_FUNCTIONS`` do. The results plug into ``apply_rope(x, inv_freq=...,
attention_factor=...)``. Add a variant: write a function with the shared signature,
register it, and the tests that loop over ``SCALINGS`` cover it.
Names: d = head dimension, theta_j = inv_freq[j] (j counts pairs), s = factor,
L0 = original_max_position.
"""
from __future__ import annotations

import inspect
import math
from typing import Callable

import torch
from torch import Tensor

from . import _validate as v
from .angles import rope_frequencies
from .device import float64_device, moved

ScalingFn = Callable[..., tuple[Tensor, float]]

# Every scaling function takes these keywords; anything else is a method option.
_COMMON = ("d", "factor", "base", "original_max_position", "seq_len", "device")


def _default(d: int, base: float, device) -> Tensor:
    # float64 throughout: the float32 result is then rounded once, at the end.
    return rope_frequencies(d, base=base, device=device, dtype=torch.float64)


def _none(d, *, factor, base, original_max_position, seq_len, device) -> tuple[Tensor, float]:
    """Plain RoPE: theta_j = base**(-2j/d), attention factor 1."""
    return _default(d, base, device), 1.0


def _linear(d, *, factor, base, original_max_position, seq_len, device) -> tuple[Tensor, float]:
    """Position interpolation: theta_j / s. Dividing every frequency by s is the same as
    dividing every position by s (angles are products m * theta_j)."""
    return _default(d, base, device) / factor, 1.0


def _ntk_base(d: int, base: float, scale: float) -> float:
    # The exponent d/(d-2) makes the slowest pair (j = d/2 - 1) slow down by exactly
    # `scale`: base'**(-(d-2)/d) = base**(-(d-2)/d) / scale.
    return base * scale ** (d / (d - 2))


def _ntk(d, *, factor, base, original_max_position, seq_len, device) -> tuple[Tensor, float]:
    """NTK-aware scaling: rope frequencies with base' = base * s**(d/(d-2))."""
    return _default(d, _ntk_base(d, base, factor), device), 1.0


def _dynamic(d, *, factor, base, original_max_position, seq_len, device) -> tuple[Tensor, float]:
    """Dynamic NTK: "ntk" with scale s * L / L0 - (s - 1), L = max(seq_len, L0).

    At L = L0 the scale is 1 (plain RoPE); it grows linearly with the length. This is
    Hugging Face's formula ("dynamic"), which takes L0 from max_position_embeddings.
    """
    length = original_max_position if seq_len is None else max(seq_len, original_max_position)
    scale = factor * length / original_max_position - (factor - 1)
    return _default(d, _ntk_base(d, base, scale), device), 1.0


def _yarn_correction_dim(turns: float, d: int, base: float, original_max_position: int) -> float:
    """The (fractional) pair index j whose frequency makes `turns` full turns over L0 positions.

    Pair j turns L0 * theta_j / (2 pi) times; solving that = turns for j with
    theta_j = base**(-2j/d) gives j = d ln(L0 / (2 pi turns)) / (2 ln base).
    """
    return d * math.log(original_max_position / (turns * 2 * math.pi)) / (2 * math.log(base))


def _yarn(
    d,
    *,
    factor,
    base,
    original_max_position,
    seq_len,
    device,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    truncate: bool = True,
    attention_factor: float | None = None,
    mscale: float | None = None,
    mscale_all_dim: float | None = None,
) -> tuple[Tensor, float]:
    """YaRN: blend theta_j (kept) and theta_j / s (interpolated) by a ramp over pairs.

    Pairs that make more than beta_fast turns over L0 positions keep theta_j (they have
    seen every angle many times); pairs making fewer than beta_slow turns are
    interpolated; in between, a linear ramp over the pair index. truncate=True rounds
    the ramp's ends outwards to whole pairs, as the reference code does. The attention
    factor 0.1 ln(s) + 1 multiplies q and k (so scores by its square). DeepSeek's form:
    with mscale and mscale_all_dim both given (and nonzero), the factor depends on both
    settings and is 1.0 when they are equal (DeepSeek-V3 puts the whole correction in the
    softmax scale instead); how each setting acts is derived in notebooks/08_rope_in_models.ipynb
    (Exercise 2), as transformers computes it.
    """
    extrapolated, _ = _none(d, factor=factor, base=base, original_max_position=original_max_position,
                            seq_len=seq_len, device=device)
    interpolated, _ = _linear(d, factor=factor, base=base, original_max_position=original_max_position,
                              seq_len=seq_len, device=device)
    low = _yarn_correction_dim(beta_fast, d, base, original_max_position)
    high = _yarn_correction_dim(beta_slow, d, base, original_max_position)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001  # a step instead of a ramp; avoids dividing by zero
    j = torch.arange(d // 2, device=extrapolated.device, dtype=torch.float64)
    ramp = ((j - low) / (high - low)).clamp(0, 1)  # 0: keep theta_j, 1: theta_j / s
    inv_freq = interpolated * ramp + extrapolated * (1 - ramp)
    if attention_factor is None:
        if mscale and mscale_all_dim:  # as transformers: one of them missing or 0 means the plain form
            attention_factor = _yarn_mscale(factor, mscale) / _yarn_mscale(factor, mscale_all_dim)
        else:
            attention_factor = _yarn_mscale(factor)
    return inv_freq, float(attention_factor)


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's magnitude correction 0.1 mscale ln(s) + 1 (1 when s <= 1)."""
    return 0.1 * mscale * math.log(factor) + 1.0 if factor > 1 else 1.0


def _llama3(
    d,
    *,
    factor,
    base,
    original_max_position,
    seq_len,
    device,
    low_freq_factor: float = 1.0,
    high_freq_factor: float = 4.0,
) -> tuple[Tensor, float]:
    """Llama 3.1: keep short wavelengths, interpolate long ones, smooth in between.

    wavelength_j = 2 pi / theta_j. Below L0 / high_freq_factor: theta_j; above
    L0 / low_freq_factor: theta_j / s; in between a blend with weight
    w = (L0 / wavelength_j - low_freq_factor) / (high_freq_factor - low_freq_factor).
    Equal factors leave no band in between: a step at wavelength L0 / low_freq_factor.
    """
    if not high_freq_factor >= low_freq_factor > 0:
        raise ValueError(
            f"need high_freq_factor >= low_freq_factor > 0, got high_freq_factor={high_freq_factor}, "
            f"low_freq_factor={low_freq_factor}"
        )
    inv_freq, _ = _none(d, factor=factor, base=base, original_max_position=original_max_position,
                        seq_len=seq_len, device=device)
    wavelength = 2 * math.pi / inv_freq
    turns = original_max_position / wavelength  # turns over L0
    if high_freq_factor == low_freq_factor:  # no smooth band: a step (transformers' where() does the same)
        w = (turns >= low_freq_factor).to(inv_freq.dtype)
    else:
        w = ((turns - low_freq_factor) / (high_freq_factor - low_freq_factor)).clamp(0, 1)
    # w = 1 for short wavelengths (kept), 0 for long ones (divided by s).
    return inv_freq / factor * (1 - w) + inv_freq * w, 1.0


def _factor_list(name: str, values: object, d: int) -> Tensor:
    """One of LongRoPE's per-pair factor lists: d/2 finite numbers > 0."""
    if isinstance(values, Tensor):
        values = values.tolist()
    if not isinstance(values, (list, tuple)) or len(values) != d // 2:
        got = f"length {len(values)}" if isinstance(values, (list, tuple)) else repr(values)
        raise ValueError(f"{name} must be a list of d/2 = {d // 2} numbers (one per pair), got {got}")
    for x in values:
        v.finite_number(f"every entry of {name}", x, above=0)
    return torch.tensor(values, dtype=torch.float64)


def _longrope(
    d,
    *,
    factor,
    base,
    original_max_position,
    seq_len,
    device,
    short_factor: list[float] | None = None,
    long_factor: list[float] | None = None,
    attention_factor: float | None = None,
) -> tuple[Tensor, float]:
    """LongRoPE: theta_j / lambda_j, each pair with its own factor lambda_j found by search.

    Inputs up to L0 tokens (seq_len None or <= L0) use short_factor, longer ones
    long_factor: the model switches lists when the input outgrows its training length.
    None means uniform factors, 1 (short) and s (long): plain RoPE, then position
    interpolation. The attention factor sqrt(1 + ln s / ln L0) multiplies q and k.
    """
    short = torch.ones(d // 2, dtype=torch.float64) if short_factor is None else _factor_list(
        "short_factor", short_factor, d)
    long_ = torch.full((d // 2,), factor, dtype=torch.float64) if long_factor is None else _factor_list(
        "long_factor", long_factor, d)
    inv_freq = _default(d, base, device)
    lam = long_ if seq_len is not None and seq_len > original_max_position else short
    if attention_factor is None:
        if factor > 1 and original_max_position < 2:
            raise ValueError("original_max_position must be >= 2 for longrope's attention factor (it divides by ln L0)")
        attention_factor = math.sqrt(1 + math.log(factor) / math.log(original_max_position)) if factor > 1 else 1.0
    return inv_freq / lam.to(inv_freq.device), float(attention_factor)


def _proportional(
    d, *, factor, base, original_max_position, seq_len, device, partial_rotary_factor: float = 1.0
) -> tuple[Tensor, float]:
    """Gemma 4's proportional RoPE: d/2 frequencies, of which only the first p d/2 turn.

    Those keep theta_j = base**(-2j/d) with the full head dimension d in the exponent
    (unlike a RoPE of dimension p d, whose frequencies would spread over the same range);
    the remaining pairs get frequency 0, so they never rotate and carry no position.
    All are divided by s (as "linear").
    """
    p = v.finite_number("partial_rotary_factor", partial_rotary_factor, at_least=0)
    if p > 1:
        raise ValueError(f"partial_rotary_factor must be a finite number in [0, 1], got {partial_rotary_factor!r}")
    inv_freq = _default(d, base, device)
    inv_freq[int(p * d // 2):] = 0.0
    return inv_freq / factor, 1.0


# One registry: name -> function with the shared keywords above (plus its own options).
SCALINGS: dict[str, ScalingFn] = {
    "none": _none,
    "linear": _linear,
    "ntk": _ntk,
    "dynamic": _dynamic,
    "yarn": _yarn,
    "llama3": _llama3,
    "longrope": _longrope,
    "proportional": _proportional,
}


def scaling_options(method: str) -> dict[str, object]:
    """The method-specific options of a scaling and their defaults, e.g. yarn's beta_fast=32.

    Taught in: notebooks/07_beyond.ipynb
    """
    method = v.one_of("method", method, SCALINGS)
    params = inspect.signature(SCALINGS[method]).parameters
    return {name: p.default for name, p in params.items() if name not in _COMMON}


def scaled_rope_frequencies(
    d: int,
    *,
    method: str,
    factor: float | None,
    base: float = 10000.0,
    original_max_position: int = 2048,
    seq_len: int | None = None,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
    max_position: int | None = None,
    **method_options: object,
) -> tuple[Tensor, float]:
    """RoPE inverse frequencies for a context ``factor`` times the original, and YaRN's attention factor.

    d:       even head dimension (>= 4 for "ntk" and "dynamic", whose exponent is d/(d-2))
    method:  a key of ``SCALINGS``: "none", "linear", "ntk", "dynamic", "yarn", "llama3",
             "longrope", "proportional"
    factor:  s >= 1, the context extension (target length / original_max_position);
             None means max_position / original_max_position (as transformers reads
             DeepSeek's and Phi-3's configs)
    original_max_position: L0, the context the model was trained on
    seq_len: current length; "dynamic" and "longrope" use it (None means L0)
    max_position: the extended context (config.json's max_position_embeddings); only read
             when factor is None
    method_options: "yarn": beta_fast=32, beta_slow=1, truncate=True, attention_factor=None,
                    mscale=None, mscale_all_dim=None; "llama3": low_freq_factor=1,
                    high_freq_factor=4; "longrope": short_factor, long_factor (d/2 numbers
                    each), attention_factor=None; "proportional": partial_rotary_factor=1
                    (see ``scaling_options``)
    returns: (inv_freq (d // 2,) in ``dtype`` on ``device``, attention_factor float);
             use as ``apply_rope(x, inv_freq=inv_freq, attention_factor=attention_factor)``
    Taught in: notebooks/07_beyond.ipynb
    """
    if method not in SCALINGS:
        raise ValueError(f"method must be one of {tuple(SCALINGS)}, got {method!r}")
    d = v.even_dim("d", d)
    if method in ("ntk", "dynamic") and d < 4:
        raise ValueError(f"d must be >= 4 for method={method!r} (the exponent is d/(d-2)), got {d}")
    original_max_position = v.int_at_least("original_max_position", original_max_position, 1)
    if factor is None:
        if max_position is None:
            raise ValueError("factor=None means max_position / original_max_position: give max_position too")
        max_position = v.int_at_least("max_position", max_position, original_max_position)
        factor = max_position / original_max_position
    factor = v.finite_number("factor", factor, at_least=1)
    base = v.base_above_one(base)
    if seq_len is not None:
        seq_len = v.int_at_least("seq_len", seq_len, 1)
    v.dtype_in("dtype", dtype, (torch.float32, torch.float64))
    allowed = scaling_options(method)
    unknown = sorted(set(method_options) - set(allowed))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for method={method!r}; it accepts {sorted(allowed) or 'none'}")
    # The float64 work runs where float64 exists (the CPU for MPS); only the result is moved.
    inv_freq, attention_factor = SCALINGS[method](
        d, factor=float(factor), base=base, original_max_position=original_max_position, seq_len=seq_len,
        device=float64_device(device), **method_options,
    )
    return moved(inv_freq, device, dtype), float(attention_factor)

