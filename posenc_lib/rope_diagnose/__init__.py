"""Check a RoPE implementation against the reference, and name its bug: ``diagnose_rope(fn, ...)``;
every RoPE of a transformers model in one call: ``diagnose_model(model)``.

``fn(q, k, positions) -> (q, k)`` is run on probes (q of shape (batch, heads, seq, head_dim), k with as
many or fewer heads, positions (batch, seq), or (batch, seq, n) coordinates for MRoPE) and its output
compared with the reference (``rope.py``'s steps, in float64). On a mismatch, each hypothesis below is a
transformation of the reference; the one whose output reproduces fn's is the diagnosis (two at once
are tried when no single one does). Every hypothesis and the probe that exposes it:

  hypothesis            what fn does instead of the claimed RoPE                 exposed by
  layout                the other pair layout (interleaved <-> half), where the  start
                        config fixes one
  clockwise             R_{-m}, the transposed rotation (a convention)           start
  position_plus_one     positions + 1 (1-based), in every call or once a         start / offset
                        sequence starts past 0 (the cache length counted twice)
  position_minus_one    positions - 1, likewise                                  start / offset
  restart_at_zero       positions restart at 0: the cache offset is ignored      offset
                        (or one offset, the first sequence's, for the batch)
  offset_twice          the cache offset added twice                             offset
  first_row_positions   every sequence of a batch gets the first one's positions batched
  scaling_dropped       the context extension ignored: plain frequencies         far
  scaling_method        another method with the config's factor: PI for NTK,     start / far
                        dynamic NTK as PI, YaRN as PI, ...
  scaling_factor        the config's method with another factor (8 for 32, ...)  start / far
  frozen_dynamic        dynamic NTK's base computed once for a fixed length      start
  yarn_ramp             YaRN's ramp from other settings: truncate flipped,       start / far
                        default or swapped betas, L0 from max_position_embeddings
  llama3_bands          llama3's bands from other settings: another L0, or       far
                        other low/high_freq_factor
  longrope_switch       LongRoPE's lists switched at the wrong length (one token at L0 / past L0
                        early, never, always, or token by token)
  double_rotation       k (or q, or both) turned twice: angle 2 m theta_j        start
  low_precision_angles  frequencies, positions, angles or their product in       bf16 / fp16
                        bfloat16 or float16 (always, or for half-precision inputs)
  table_dtype           cos/sin tables stored in bfloat16 or float16 for every   start
                        input (a cache cast by model.to())
  rotation_dtype        the rotation itself in bfloat16 or float16 for every     start
                        input (q and k cast down first)
  rotated_slice         the last r features rotated instead of the first, or     start
                        the reverse (partial rotary; DeepSeek's MLA)
  rotary_dim            head_dim features rotated instead of rotary_dim, or      start
                        half or twice rotary_dim
  head_dim_exponent     theta_j = base^(-2j/head_dim) for the r rotated features start
  partial_proportional  partial rotary where proportional is claimed, or the     start
                        reverse (pairs within the block vs across the head)
  wrong_base            another base (estimated from fn's own angles)            start
  section_order         MRoPE's sections or coordinates in another order, or     start
                        every pair on the first coordinate (MRoPE read as 1-D)
  section_style         contiguous MRoPE sections where interleaved are claimed, start
                        or the reverse (Qwen2-VL's blocks vs Qwen3-VL's turns)
  no_rotation           nothing rotated                                          start
  attention_factor      a constant factor c on q and k (scores x c^2): the       start
                        claimed factor missing, doubled, or one where none is
  one_sided_factor      different factors on q and k (the attention factor on q  start
                        only: scores x a instead of x a^2)
"exposed by" is a probe the bug always fails (``Hypothesis.probe``; tests/test_rope_diagnose.py
checks it on a gallery of buggy implementations, one or more per hypothesis).

The probes (``probes.make_probes``): start, gqa (k with fewer heads), offset (a KV cache), batched,
bf16 and fp16 inputs, decode (one token), and for configs with lengths: at L0, past L0 and far (the
end of the context). No probe goes past the model's context (max_position_embeddings, or
``max_positions=``); the report names the range checked. Separately, the relative property: fn's
scores q_m . k_n for the same vectors at positions shifted by 37 must not change (they depend only on
the offset). A pair layout the config does not fix is not assumed: fn's own is found and named.
Tolerances and residuals: ``variant``. Modules: claim (what fn claims), variant (a changed reference),
probes, hypotheses, search, report, adapters (other shapes of fn), doctor (diagnose_rope, diagnose_model).
Names: d = head_dim fed to fn, r = rotated features, m, n = positions, theta_j = inv_freq[j].
"""
from .adapters import from_engine, from_hf, from_one_tensor
from .claim import Claim
from .doctor import ModelDiagnosis, diagnose_model, diagnose_rope
from .hypotheses import HYPOTHESES, Hypothesis
from .probes import Probe, make_probes
from .report import ProbeResult, RopeDiagnosis

__all__ = ["Claim", "HYPOTHESES", "Hypothesis", "ModelDiagnosis", "Probe", "ProbeResult", "RopeDiagnosis",
           "diagnose_model", "diagnose_rope", "from_engine", "from_hf", "from_one_tensor", "make_probes"]
