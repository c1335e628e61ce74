"""Rotary position embedding (posenc_lib.rope, posenc_lib.angles)."""
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl

# The worked example of the RoPE source (004_*.txt): 5 positions, d = 4, base 10000.
SOURCE_INPUT = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1], [1, -1, 1, -1], [0.5, 0.5, 0.5, 0.5]]
SOURCE_OUTPUT = [  # "rotated group 1 | rotated group 2", to 4 decimals as printed
    [1, 0, 1, 0],
    [-0.8415, 0.5403, -0.0100, 0.9999],
    [-1.3254, 0.4932, 0.9798, 1.0198],
    [-0.8489, 1.1311, 1.0296, -0.9696],
    [0.0516, -0.7052, 0.4796, 0.5196],
]


def naive_rope(x: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """Reference written with math, one pair at a time (interleaved pairs)."""
    out = torch.empty_like(x, dtype=torch.float64)
    n, d = x.shape
    for m in range(n):
        for j in range(d // 2):
            a = m * base ** (-2 * j / d)
            x0, x1 = x[m, 2 * j].item(), x[m, 2 * j + 1].item()
            out[m, 2 * j] = x0 * math.cos(a) - x1 * math.sin(a)
            out[m, 2 * j + 1] = x0 * math.sin(a) + x1 * math.cos(a)
    return out


def test_rope_reproduces_source_table():
    """The 5 x 4 table of the RoPE source to its 4 printed decimals."""
    out = pl.apply_rope(torch.tensor(SOURCE_INPUT))
    torch.testing.assert_close(out, torch.tensor(SOURCE_OUTPUT), atol=1e-4, rtol=0)


def test_rope_frequencies_count_pairs():
    """theta_j = base**(-2j/d): d=4 gives [1, 1/100]; j counts pairs, not features."""
    torch.testing.assert_close(pl.rope_frequencies(4), torch.tensor([1.0, 0.01]))
    f = pl.rope_frequencies(128, base=500000.0)
    assert f.shape == (64,) and f.dtype == torch.float32
    assert f[-1].item() == pytest.approx(500000.0 ** (-126 / 128), rel=1e-6)


@pytest.mark.parametrize("d, base", [(128, 10000.0), (64, 500000.0), (96, 1000000.0)])
def test_rope_frequencies_are_correctly_rounded(d, base):
    """Each float32 theta_j is the float32 nearest base**(-2j/d) (Python float64), which chapter 5 §9
    contrasts with the float32 formula 1 / base**(arange / d) (one float32 step off for some pairs)."""
    want = torch.tensor([base ** (-2 * j / d) for j in range(d // 2)], dtype=torch.float64).float()
    assert torch.equal(pl.rope_frequencies(d, base=base), want)
    float32_formula = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    assert not torch.equal(float32_formula, want)  # the two ways of computing differ somewhere
    assert (float32_formula.double() - want.double()).abs().max() <= 2 * torch.finfo(torch.float32).eps


@pytest.mark.parametrize("d", [2, 4, 10, 64])
@pytest.mark.parametrize("base", [100.0, 10000.0])
def test_apply_rope_matches_naive_loop(d, base):
    """apply_rope equals a per-pair math loop (float64)."""
    x = torch.randn(9, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    torch.testing.assert_close(pl.apply_rope(x, base=base), naive_rope(x, base), atol=1e-12, rtol=0)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_apply_rope_equals_dense_matrix(layout):
    """apply_rope(x)[m] == rope_matrix(m) @ x[m] for both layouts."""
    x = torch.randn(12, 8)
    out = pl.apply_rope(x, layout=layout)
    for m in range(12):
        torch.testing.assert_close(out[m], pl.rope_matrix(m, 8, layout=layout) @ x[m], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rope_matrix_is_orthogonal_and_composes(layout):
    """R_m^T R_n = R_{n-m}: the algebra behind relative positions."""
    Rm, Rn = pl.rope_matrix(3, 6, layout=layout), pl.rope_matrix(11, 6, layout=layout)
    torch.testing.assert_close(Rm.T @ Rm, torch.eye(6), atol=1e-6, rtol=0)
    torch.testing.assert_close(Rm.T @ Rn, pl.rope_matrix(8, 6, layout=layout), atol=1e-5, rtol=0)


@given(half_d=st.integers(1, 32), seed=st.integers(0, 2**16), layout=st.sampled_from(["interleaved", "half"]))
def test_rope_preserves_norms(half_d, seed, layout):
    """Rotations do not change lengths."""
    x = torch.randn(7, 2 * half_d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(pl.apply_rope(x, layout=layout).norm(dim=-1), x.norm(dim=-1))


@given(
    m=st.integers(0, 4096),
    n=st.integers(0, 4096),
    shift=st.integers(-4096, 4096),
    half_d=st.integers(1, 32),
    seed=st.integers(0, 2**16),
    layout=st.sampled_from(["interleaved", "half"]),
)
def test_rope_score_depends_only_on_offset(m, n, shift, half_d, seed, layout):
    """<R_m q, R_n k> == <R_{m+s} q, R_{n+s} k> for any shift s."""
    shift = max(shift, -min(m, n))
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2 * half_d, dtype=torch.float64, generator=g), torch.randn(2 * half_d, dtype=torch.float64, generator=g)

    def score(a, b):
        qa = pl.apply_rope(q[None], torch.tensor([a]), layout=layout)[0]
        kb = pl.apply_rope(k[None], torch.tensor([b]), layout=layout)[0]
        return (qa @ kb).item()

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)


@given(half_d=st.integers(1, 32), seed=st.integers(0, 2**16))
def test_layouts_agree_after_permutation(half_d, seed):
    """interleaved(x)[..., P] == half(x[..., P]) with P = layout_permutation(d)."""
    d = 2 * half_d
    x = torch.randn(2, 3, 5, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    P = pl.layout_permutation(d)
    torch.testing.assert_close(pl.apply_rope(x)[..., P], pl.apply_rope(x[..., P], layout="half"))


def test_layouts_differ_without_permutation():
    """The two layouts are different functions on the same features (d >= 4)."""
    x = torch.randn(5, 8)
    assert not torch.allclose(pl.apply_rope(x), pl.apply_rope(x, layout="half"), atol=1e-3)


def test_batched_positions_and_heads_broadcast():
    """(batch, seq) positions rotate every head of that batch row."""
    x = torch.randn(2, 3, 4, 8)
    pos = torch.tensor([[0, 1, 2, 3], [10, 11, 12, 13]])
    out = pl.apply_rope(x, pos)
    for b in range(2):
        torch.testing.assert_close(out[b], pl.apply_rope(x[b], pos[b]))
    torch.testing.assert_close(out[0], pl.apply_rope(x[0]))


def test_rope_angles_shapes():
    """int, 1-D and 2-D positions give (n, d/2), (seq, d/2) and (batch, seq, d/2)."""
    assert pl.rope_angles(5, 8).shape == (5, 4)
    assert pl.rope_angles(torch.arange(3), 8).shape == (3, 4)
    assert pl.rope_angles(torch.zeros(2, 3, dtype=torch.long), 8).shape == (2, 3, 4)
    torch.testing.assert_close(pl.rope_angles(3, 4), torch.tensor([[0, 0], [1, 0.01], [2, 0.02]]))


def test_rotary_module_matches_function_and_keeps_buffers_out_of_state_dict():
    """RotaryEmbedding(q, k) == apply_rope on each; inv_freq is not saved."""
    rot = pl.RotaryEmbedding(16, layout="half")
    q, k = torch.randn(2, 4, 6, 16), torch.randn(2, 4, 6, 16)
    rq, rk = rot(q, k)
    torch.testing.assert_close(rq, pl.apply_rope(q, layout="half"))
    torch.testing.assert_close(rk, pl.apply_rope(k, layout="half"))
    assert rot.state_dict() == {}  # inv_freq and the cos/sin tables are not saved


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_module_cache_gives_apply_ropes_bits_and_grows_on_demand(layout, dtype):
    inv = pl.rope_frequencies(16, base=500.0)
    rot = pl.RotaryEmbedding(16, layout=layout, inv_freq=inv, attention_factor=1.1)
    assert rot.cos_cached.shape == (0, 8)  # nothing computed until a sequence arrives
    for seq in (5, 3, 40, 17):
        q, k = torch.randn(2, 3, seq, 16).to(dtype), torch.randn(2, 3, seq, 16).to(dtype)
        rq, rk = rot(q, k)
        kw = dict(layout=layout, inv_freq=inv, attention_factor=1.1)
        assert torch.equal(rq, pl.apply_rope(q, **kw)) and torch.equal(rk, pl.apply_rope(k, **kw))
    assert rot.cos_cached.shape == (64, 8) and rot.cos_cached.dtype == torch.float32  # grown to a power of two
    table = rot.cos_cached
    rot(torch.randn(1, 64, 16), torch.randn(1, 64, 16))
    assert rot.cos_cached is table  # long enough already: not rebuilt


def test_rotary_module_offset_and_explicit_positions_agree():
    """Decoding one token at offset t (a KV cache of t tokens) rotates it like position t of the full sequence."""
    rot = pl.RotaryEmbedding(8)
    x = torch.randn(2, 4, 10, 8)
    full, _ = rot(x, x)
    for t in (0, 3, 9):
        step, _ = rot(x[..., t:t + 1, :], x[..., t:t + 1, :], offset=t)
        torch.testing.assert_close(step, full[..., t:t + 1, :])
    pos = torch.tensor([[7, 1, 4], [0, 9, 2]])
    got, _ = rot(x[..., :3, :], x[..., :3, :], pos)
    torch.testing.assert_close(got, pl.apply_rope(x[..., :3, :], pos))
    with pytest.raises(ValueError, match="offset must be an integer >= 0"):
        rot(x, x, offset=-1)
    with pytest.raises(ValueError, match="q.shape\\[-1\\] must be 8"):
        rot(torch.randn(3, 6), x)


def test_rotary_module_keeps_float32_tables_through_dtype_casts():
    rot = pl.RotaryEmbedding(8)
    rot(torch.randn(4, 8), torch.randn(4, 8))
    rot = rot.to(torch.bfloat16)
    assert rot.inv_freq.dtype == rot.cos_cached.dtype == rot.sin_cached.dtype == torch.float32
    torch.testing.assert_close(rot.inv_freq, pl.rope_frequencies(8), rtol=0, atol=0)
    rot.half()
    assert rot.inv_freq.dtype == torch.float32


def test_rotary_module_forward_never_synchronises():
    """No .item(), .tolist(), .cpu() or .numpy() in forward: on a GPU each would stall the stream."""
    from torch.overrides import TorchFunctionMode

    class Spy(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.names = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            self.names.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    rot = pl.RotaryEmbedding(16, layout="half")
    q = torch.randn(1, 2, 33, 16)
    with Spy() as spy:
        rot(q, q)  # grows the cache
        rot(q, q)  # reads it
        rot(q[..., :1, :], q[..., :1, :], offset=40)  # grows again
        rot(q, q, torch.arange(33))  # explicit positions
    assert spy.names, "the spy saw nothing: it would not catch a sync either"
    assert "mul" in spy.names or "__mul__" in spy.names
    synced = {"item", "tolist", "cpu", "numpy"} & set(spy.names)
    assert not synced, f"forward called {synced}"
    with Spy() as spy:
        q.sum().item()  # the spy does see a sync when there is one
    assert "item" in spy.names


def test_attention_factor_scales_output():
    """attention_factor multiplies the rotated vector (YaRN's magnitude correction)."""
    x = torch.randn(4, 8)
    torch.testing.assert_close(pl.apply_rope(x, attention_factor=1.5), 1.5 * pl.apply_rope(x))


def test_inv_freq_overrides_base():
    """Passing inv_freq = rope_frequencies(d, base=b) equals passing base=b."""
    x = torch.randn(6, 8)
    torch.testing.assert_close(pl.apply_rope(x, inv_freq=pl.rope_frequencies(8, base=500.0)), pl.apply_rope(x, base=500.0))


# ---------------------------------------------------------------- partial rotary: rotary_dim

def split_and_rotate(x: torch.Tensor, r: int, layout: str, base: float = 10000.0) -> torch.Tensor:
    """Reference for rotary_dim = r: the dense R_m of dimension r on the first r features, the rest copied."""
    out = x.clone().double()
    for m in range(x.shape[-2]):
        out[..., m, :r] = x[..., m, :r].double() @ pl.rope_matrix(m, r, base=base, layout=layout).double().T
    return out


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("d,r", [(8, 2), (16, 8), (12, 4), (64, 16), (7, 4), (10, 10)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_rotary_dim_rotates_the_first_r_features_and_passes_the_rest(layout, d, r, dtype):
    x = torch.randn(2, 3, 9, d, generator=torch.Generator().manual_seed(d * r)).to(dtype)
    out = pl.apply_rope(x, rotary_dim=r, layout=layout, base=500.0)
    assert out.shape == x.shape and out.dtype == dtype
    torch.testing.assert_close(out.double(), split_and_rotate(x, r, layout, base=500.0), atol=1e-5, rtol=1e-5)
    assert torch.equal(out[..., r:], x[..., r:])  # passed through bit for bit


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotary_dim_equal_to_d_is_plain_rope_and_uses_rotary_dim_frequencies(layout):
    x = torch.randn(4, 10, 16)
    assert torch.equal(pl.apply_rope(x, rotary_dim=16, layout=layout), pl.apply_rope(x, layout=layout))
    # inv_freq for rotary_dim r has r/2 entries: the frequencies of an r-dimensional RoPE
    inv = pl.rope_frequencies(8, base=50.0)
    got = pl.apply_rope(x, rotary_dim=8, inv_freq=inv, layout=layout)
    assert torch.equal(got[..., :8], pl.apply_rope(x[..., :8].contiguous(), base=50.0, layout=layout))
    with pytest.raises(ValueError, match=r"inv_freq must have shape \(4,\)"):
        pl.apply_rope(x, rotary_dim=8, inv_freq=pl.rope_frequencies(16))


def test_rotary_dim_goes_through_the_dispatch_and_keeps_the_precision_contract(every_size):
    """The rotated slice is made contiguous, so the C kernel can serve it (where built); bits equal the
    dispatch on that slice, and stay within float32 rounding of the reference rotation."""
    from posenc_lib import rope as R
    from posenc_lib import rotary
    from posenc_lib.kernels import cpu

    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(2, 5, 13, 24).to(dtype)
        part = x[..., :8].contiguous()
        cos, sin = R.rope_tables(R.position_angles(part, None, R.RopeOptions()))
        got = pl.apply_rope(x, rotary_dim=8, layout="half")[..., :8]
        assert torch.equal(got, rotary.rotate(part, cos, sin, "half"))
        assert cpu.applies(part, cos, sin) == (cpu.enabled() and cpu.available())
        torch.testing.assert_close(got, R.rotate_in_float32(part, cos, sin, "half"))


def test_rotary_dim_attention_factor_scales_only_the_rotated_features():
    """As transformers' partial-rotary models do: cos and sin carry the factor, the pass-through does not."""
    x = torch.randn(6, 16)
    out = pl.apply_rope(x, rotary_dim=4, attention_factor=1.5)
    torch.testing.assert_close(out[:, :4], 1.5 * pl.apply_rope(x[:, :4].contiguous()))
    assert torch.equal(out[:, 4:], x[:, 4:])


@given(m=st.integers(0, 500), n=st.integers(0, 500), shift=st.integers(0, 500), seed=st.integers(0, 2**16))
def test_partial_rotary_score_depends_only_on_offset(m, n, shift, seed):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 12, dtype=torch.float64, generator=g), torch.randn(1, 12, dtype=torch.float64, generator=g)

    def score(a, b):
        qa = pl.apply_rope(q, torch.tensor([a]), rotary_dim=4, layout="half")
        kb = pl.apply_rope(k, torch.tensor([b]), rotary_dim=4, layout="half")
        return (qa @ kb.T).item()

    assert score(m, n) == pytest.approx(score(m + shift, n + shift), abs=1e-9)


def test_rotary_dim_gradients_match_float64():
    x = torch.randn(2, 7, 16, requires_grad=True)
    x64 = x.detach().double().requires_grad_()
    w = torch.randn(2, 7, 16)
    (pl.apply_rope(x, rotary_dim=6) * w).sum().backward()
    (pl.apply_rope(x64, rotary_dim=6) * w.double()).sum().backward()
    torch.testing.assert_close(x.grad.double(), x64.grad, atol=1e-5, rtol=1e-5)
    assert torch.equal(x.grad[..., 6:], w[..., 6:])  # pass-through: gradient 1 per feature


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotary_module_with_rotary_dim_matches_apply_rope(layout):
    inv = pl.rope_frequencies(8, base=100.0)
    rot = pl.RotaryEmbedding(20, rotary_dim=8, inv_freq=inv, layout=layout, attention_factor=1.1)
    assert rot.cos_cached.shape == (0, 4) and rot.inv_freq.shape == (4,)
    x = torch.randn(2, 3, 11, 20)
    kw = dict(rotary_dim=8, inv_freq=inv, layout=layout, attention_factor=1.1)
    rq, rk = rot(x, x)
    assert torch.equal(rq, pl.apply_rope(x, **kw)) and torch.equal(rk, rq)
    step, _ = rot(x[..., 5:6, :], x[..., 5:6, :], offset=5)
    torch.testing.assert_close(step, rq[..., 5:6, :])
    pos = torch.tensor([[3, 1, 4], [1, 5, 9]])
    got, _ = rot(x[..., :3, :], x[..., :3, :], pos)
    torch.testing.assert_close(got, pl.apply_rope(x[..., :3, :], pos, **kw))
    plain = pl.RotaryEmbedding(20, rotary_dim=8, base=100.0)
    torch.testing.assert_close(plain.inv_freq, inv, rtol=0, atol=0)


@pytest.mark.parametrize("kw,match", [
    (dict(rotary_dim=5), "rotary_dim must be even"),
    (dict(rotary_dim=0), "rotary_dim must be an integer >= 2"),
    (dict(rotary_dim=18), r"rotary_dim must be at most the head dimension (x.shape\[-1\]|d) = 16, got 18"),
    (dict(rotary_dim=True), "rotary_dim must be an integer"),
    (dict(rotary_dim=4.0), "rotary_dim must be an integer"),
])
def test_rotary_dim_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        pl.apply_rope(torch.randn(3, 16), **kw)
    with pytest.raises(ValueError, match=match):
        pl.RotaryEmbedding(16, **kw)


def test_odd_head_dim_needs_rotary_dim():
    with pytest.raises(ValueError, match=r"x.shape\[-1\] must be even"):
        pl.apply_rope(torch.randn(3, 7))
    assert pl.apply_rope(torch.randn(3, 7), rotary_dim=6).shape == (3, 7)


@pytest.mark.crosscheck
@pytest.mark.parametrize("head_dim,p", [(32, 0.5), (64, 0.25), (40, 0.4)])
def test_rotary_dim_matches_hf_partial_rotary(head_dim, p):
    """transformers' Phi-3 (q_rot, q_pass split, half layout) with partial_rotary_factor p."""
    pytest.importorskip("transformers")
    from transformers import Phi3Config
    from transformers.models.phi3.modeling_phi3 import Phi3RotaryEmbedding, apply_rotary_pos_emb

    heads = 2
    cfg = Phi3Config(hidden_size=heads * head_dim, num_attention_heads=heads, num_key_value_heads=heads,
                     partial_rotary_factor=p, rope_theta=10000.0, max_position_embeddings=512)
    r = int(head_dim * p)
    q, k = torch.randn(1, heads, 19, head_dim), torch.randn(1, heads, 19, head_dim)
    pos = torch.arange(40, 59)[None]
    cos, sin = Phi3RotaryEmbedding(cfg)(q, pos)
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(pl.apply_rope(q, pos[0], rotary_dim=r, layout="half"), hq, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(pl.apply_rope(k, pos[0], rotary_dim=r, layout="half"), hk, atol=1e-4, rtol=1e-5)
