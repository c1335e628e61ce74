"""Every public function rejects bad input with a ValueError naming the parameter."""
import pytest
import torch

import posenc_lib as pl

x8 = torch.randn(2, 5, 8)
CASES = [
    # (call, text the message must contain)
    (lambda: pl.integer_positions(-1, 4), "n must be"),
    (lambda: pl.integer_positions(3, 0), "d must be"),
    (lambda: pl.binary_positions(9, 3), "n must be <= 2**d = 8"),
    (lambda: pl.binary_positions(-2, 3), "n must be"),
    (lambda: pl.sinusoidal_positions(4, 5), "d must be even"),
    (lambda: pl.sinusoidal_positions(-4, 6), "n must be"),
    (lambda: pl.sinusoidal_positions(4, 6, layout="zigzag"), "layout must be one of"),
    (lambda: pl.sinusoidal_positions(4, 6, base=1.0), "base must be a finite number > 1"),
    (lambda: pl.rope_frequencies(7), "d must be even"),
    (lambda: pl.rope_frequencies(8, base=0.5), "base must be a finite number > 1"),
    (lambda: pl.rope_frequencies(8, base=float("nan")), "base must be a finite number"),
    (lambda: pl.rope_angles(-3, 8), "positions must be"),
    (lambda: pl.rope_angles(torch.tensor([0.5, 1.5]), 8), "positions must have an integer dtype"),
    (lambda: pl.rope_angles(torch.zeros(2, 2, 2, dtype=torch.long), 8), "positions must be 1-D"),
    (lambda: pl.rope_angles(4, 8, inv_freq=torch.ones(3)), "inv_freq must have shape (4,)"),
    (lambda: pl.apply_rope(torch.randn(5, 7)), "x.shape[-1] must be even"),
    (lambda: pl.apply_rope(torch.randn(8)), "x must be a tensor of shape"),
    (lambda: pl.apply_rope(x8, torch.arange(4)), "positions must have shape (5,)"),
    (lambda: pl.apply_rope(x8, torch.arange(5.0)), "positions must have an integer dtype"),
    (lambda: pl.apply_rope(x8, torch.zeros(3, 5, dtype=torch.long)), "batched positions"),
    (lambda: pl.apply_rope(x8, layout="neox"), "layout must be one of"),
    (lambda: pl.apply_rope(x8, base=-2.0), "base must be a finite number > 1"),
    (lambda: pl.rope_matrix(1.5, 8), "m must be an integer"),
    (lambda: pl.rope_matrix(2, 9), "d must be even"),
    (lambda: pl.alibi_slopes(0), "num_heads must be an integer >= 1"),
    (lambda: pl.alibi_bias(0, 4), "num_heads must be"),
    (lambda: pl.alibi_bias(4, -1), "q_len must be"),
    (lambda: pl.alibi_bias(4, 5, 3), "k_len must be >= q_len=5"),
    (lambda: pl.alibi_bias(4, 5, mode="bidirectional"), "mode must be one of"),
    (lambda: pl.alibi_bias(3, 5, mode="nonsymmetric"), "num_heads must be even"),
    (lambda: pl.alibi_bias(4, 5, slopes=torch.ones(3)), "slopes must have shape (4,)"),
    (lambda: pl.relative_positions(-1, 3), "q_len must be"),
    (lambda: pl.relative_positions(2, -3), "k_len must be"),
    (lambda: pl.clipped_relative_positions(3, 3, -1), "max_distance must be"),
    (lambda: pl.t5_relative_bucket(torch.arange(3.0)), "relative_position must have an integer dtype"),
    (lambda: pl.t5_relative_bucket(torch.arange(3), num_buckets=2), "num_buckets must be"),
    (lambda: pl.t5_relative_bucket(torch.arange(3), num_buckets=32, max_distance=8), "max_distance must be"),
    (lambda: pl.attention(x8, torch.randn(2, 5, 4), x8), "k.shape[-1] must equal q.shape[-1]=8"),
    (lambda: pl.attention(x8, x8, torch.randn(2, 4, 8)), "v.shape[-2] must equal k.shape[-2]=5"),
    (lambda: pl.attention(x8, x8, x8, bias=torch.randn(4, 4)), "bias must broadcast"),
    (lambda: pl.attention(x8, torch.randn(3, 5, 8), torch.randn(3, 5, 8)), "must share leading dims"),
    (lambda: pl.attention(torch.randn(2, 6, 8), x8, x8, causal=True), "k_len must be >= q_len=6"),
    (lambda: pl.RotaryEmbedding(5), "d must be even"),
    (lambda: pl.RotaryEmbedding(8)(torch.randn(2, 4, 6), torch.randn(2, 4, 8)), "q.shape[-1] must be 8"),
    (lambda: pl.ALiBi(0), "num_heads must be"),
    (lambda: pl.T5RelativeBias(0), "num_heads must be"),
    (lambda: pl.SinusoidalPositionalEncoding(7), "d must be even"),
    (lambda: pl.SinusoidalPositionalEncoding(8)(torch.randn(3, 6)), "x.shape[-1] must be 8"),
    (lambda: pl.LearnedPositionalEncoding(0, 8), "max_len must be"),
    (lambda: pl.ShawRelativePositions(4, -1), "max_distance must be"),
    (lambda: pl.shaw_attention(x8, x8, x8, torch.zeros(5, 5, 8), torch.zeros(4, 5, 8)), "a_v must have shape (5, 5, 8)"),
]


@pytest.mark.parametrize("call,message", CASES, ids=[m for _, m in CASES])
def test_bad_input_raises_value_error_naming_parameter(call, message):
    with pytest.raises(ValueError) as err:
        call()
    assert message in str(err.value)
