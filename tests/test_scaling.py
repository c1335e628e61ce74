"""Context-extension frequency scalings (posenc_lib.scaling)."""
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl
from posenc_lib.scaling import SCALINGS, scaled_rope_frequencies, scaling_options

DIMS = [16, 64, 128]
FACTORS = [1.0, 2.0, 4.0, 8.0, 32.0]


def default(d, base=10000.0):
    return pl.rope_frequencies(d, base=base, dtype=torch.float64)


def scaled(d, method, factor, **kw):
    return scaled_rope_frequencies(d, method=method, factor=factor, dtype=torch.float64, **kw)


# ---------------------------------------------------------------- registry-wide properties

@pytest.mark.parametrize("method", sorted(SCALINGS))
@pytest.mark.parametrize("d", DIMS)
def test_every_scaling_returns_d_over_2_positive_frequencies(method, d):
    """Shape (d/2,), float32 by default, positive and finite, attention factor >= 1."""
    inv_freq, att = scaled_rope_frequencies(d, method=method, factor=4.0, seq_len=8192)
    assert inv_freq.shape == (d // 2,) and inv_freq.dtype == torch.float32
    assert torch.isfinite(inv_freq).all() and (inv_freq > 0).all()
    assert isinstance(att, float) and att >= 1.0


@pytest.mark.parametrize("method", sorted(SCALINGS))
def test_every_scaling_never_speeds_a_pair_up_nor_slows_it_beyond_factor(method):
    """default / factor <= scaled <= default for every pair (context extension only slows pairs down)."""
    d, s = 64, 8.0
    f = scaled(d, method, s, seq_len=2048 * 8)[0]
    ref = default(d)
    assert (f <= ref * (1 + 1e-12)).all()
    if method != "dynamic":  # dynamic's scale at seq_len = s*L0 is s*s - s + 1 > s
        assert (f >= ref / s * (1 - 1e-12)).all()


@pytest.mark.parametrize("method", sorted(SCALINGS))
def test_factor_one_is_plain_rope(method):
    """factor = 1 changes nothing, for every method."""
    f, att = scaled(32, method, 1.0)
    torch.testing.assert_close(f, default(32))
    assert att == 1.0


@pytest.mark.parametrize("method", sorted(SCALINGS))
def test_device_and_dtype_are_honoured(method):
    f, _ = scaled_rope_frequencies(16, method=method, factor=2.0, device="cpu", dtype=torch.float64)
    assert f.dtype == torch.float64 and f.device.type == "cpu"


# ---------------------------------------------------------------- each method

@given(d=st.sampled_from([4, 8, 16, 64, 128]), factor=st.floats(1.0, 64.0), base=st.sampled_from([100.0, 1e4, 5e5]))
def test_linear_is_default_over_factor(d, factor, base):
    """Position interpolation: theta_j / s, exactly."""
    torch.testing.assert_close(scaled(d, "linear", factor, base=base)[0], default(d, base) / factor)


def test_linear_frequencies_equal_interpolated_positions():
    """Dividing frequencies by s rotates position m as plain RoPE rotates m / s (HF's note)."""
    x = torch.randn(2, 16, 8, dtype=torch.float64)
    inv, _ = scaled(8, "linear", 4.0)
    pos = torch.arange(0, 64, 4)
    torch.testing.assert_close(pl.apply_rope(x, pos, inv_freq=inv), pl.apply_rope(x, pos // 4))


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("factor", FACTORS[1:])
def test_ntk_base_formula_and_its_endpoints(d, factor):
    """NTK: base' = base * s**(d/(d-2)); pair 0 is untouched, the slowest pair slows by exactly s."""
    f = scaled(d, "ntk", factor)[0]
    torch.testing.assert_close(f, default(d, 10000.0 * factor ** (d / (d - 2))))
    assert f[0].item() == 1.0
    assert f[-1].item() == pytest.approx(default(d)[-1].item() / factor, rel=1e-12)


@given(seq_len=st.integers(1, 2048), factor=st.floats(1.0, 16.0))
def test_dynamic_is_default_up_to_original_length(seq_len, factor):
    """Dynamic NTK leaves the frequencies alone while seq_len <= original_max_position."""
    torch.testing.assert_close(scaled(64, "dynamic", factor, seq_len=seq_len)[0], default(64))


def test_dynamic_equals_ntk_at_the_matching_scale():
    """At length L, dynamic is NTK with scale s*L/L0 - (s-1); with s = 1 that is L / L0."""
    for L in (4096, 8192, 10000):
        torch.testing.assert_close(scaled(64, "dynamic", 1.0, seq_len=L)[0], scaled(64, "ntk", L / 2048)[0])
    torch.testing.assert_close(scaled(64, "dynamic", 4.0, seq_len=4096)[0], scaled(64, "ntk", 5.0)[0])


def test_dynamic_is_not_linear():
    """As HF's own test asserts: dynamic scaling is a base change, not a division."""
    assert not torch.allclose(scaled(64, "dynamic", 4.0, seq_len=8192)[0], scaled(64, "linear", 4.0)[0])


@given(d=st.sampled_from([8, 16, 64, 128]), factor=st.floats(1.0, 64.0),
       L0=st.sampled_from([64, 512, 2048, 4096]), base=st.sampled_from([1e4, 5e5]))
def test_yarn_lies_between_interpolated_and_original(d, factor, L0, base):
    """YaRN frequencies lie between default/factor and default, pair by pair."""
    f, _ = scaled(d, "yarn", factor, original_max_position=L0, base=base)
    ref = default(d, base)
    assert (f <= ref * (1 + 1e-12)).all() and (f >= ref / factor * (1 - 1e-12)).all()


def test_yarn_keeps_fast_pairs_and_interpolates_slow_ones():
    """Pairs turning > beta_fast times over L0 are kept; < beta_slow times are divided by s."""
    d, s, L0 = 128, 8.0, 2048
    f, att = scaled(d, "yarn", s, original_max_position=L0)
    ref = default(d)
    turns = ref * L0 / (2 * math.pi)
    keep, interp = turns > 32 * 1.2, turns < 1 / 1.2  # margins for the rounding of the ramp ends
    torch.testing.assert_close(f[keep], ref[keep])
    torch.testing.assert_close(f[interp], ref[interp] / s)
    assert keep.any() and interp.any()
    assert att == pytest.approx(0.1 * math.log(s) + 1)


def test_yarn_options_change_the_ramp_and_attention_factor():
    base_f, _ = scaled(64, "yarn", 4.0)
    earlier, _ = scaled(64, "yarn", 4.0, beta_fast=64.0)  # the ramp starts at a faster pair
    assert (earlier <= base_f * (1 + 1e-12)).all() and not torch.equal(earlier, base_f)
    assert scaled(64, "yarn", 4.0, attention_factor=1.5)[1] == 1.5
    assert not torch.equal(scaled(64, "yarn", 4.0, truncate=False)[0], base_f)


def test_llama3_bands():
    """Short wavelengths kept, long ones divided by s, smooth in between (Llama 3.1 defaults)."""
    d, s, L0 = 128, 8.0, 8192
    f, _ = scaled(d, "llama3", s, original_max_position=L0, base=500000.0)
    ref = default(d, 500000.0)
    wl = 2 * math.pi / ref
    short, long_ = wl < L0 / 4, wl > L0 / 1
    torch.testing.assert_close(f[short], ref[short])
    torch.testing.assert_close(f[long_], ref[long_] / s)
    mid = ~short & ~long_
    assert mid.any() and ((f[mid] < ref[mid]) & (f[mid] > ref[mid] / s)).all()


def test_llama3_equal_band_factors_make_a_step():
    """low_freq_factor == high_freq_factor: no smooth band, kept below L0 / low, divided by s above."""
    d, s, L0 = 64, 8.0, 1024
    f, _ = scaled(d, "llama3", s, original_max_position=L0, low_freq_factor=1.0, high_freq_factor=1.0)
    ref = default(d)
    short = 2 * math.pi / ref < L0
    torch.testing.assert_close(f[short], ref[short])
    torch.testing.assert_close(f[~short], ref[~short] / s)
    assert short.any() and (~short).any()


def test_longrope_divides_each_pair_by_its_own_factor_and_switches_above_L0():
    d, L0 = 16, 1024
    short, long_ = [1.0 + 0.5 * j for j in range(8)], [3.0 + j for j in range(8)]
    kw = dict(original_max_position=L0, short_factor=short, long_factor=long_)
    for seq_len, lam in ((None, short), (L0, short), (L0 + 1, long_)):
        f, att = scaled(d, "longrope", 16.0, seq_len=seq_len, **kw)
        torch.testing.assert_close(f, default(d) / torch.tensor(lam, dtype=torch.float64))
        assert att == pytest.approx(math.sqrt(1 + math.log(16) / math.log(L0)))
    assert scaled(d, "longrope", 16.0, attention_factor=1.25, **kw)[1] == 1.25


def test_longrope_without_lists_is_plain_rope_then_interpolation():
    """short_factor None: ones (plain RoPE up to L0); long_factor None: s everywhere (linear above L0)."""
    torch.testing.assert_close(scaled(32, "longrope", 4.0, seq_len=100)[0], default(32))
    torch.testing.assert_close(scaled(32, "longrope", 4.0, seq_len=4096)[0], scaled(32, "linear", 4.0)[0])


def test_proportional_turns_only_the_first_pairs_with_full_dimension_frequencies():
    """Gemma 4: pairs j < p d / 2 keep base**(-2j/d) (d, not p d, in the exponent); the rest have frequency 0."""
    d = 64
    f, att = scaled(d, "proportional", 2.0, partial_rotary_factor=0.25, base=1e6)
    torch.testing.assert_close(f[:8], default(d, 1e6)[:8] / 2)
    assert (f[8:] == 0).all() and att == 1.0
    torch.testing.assert_close(scaled(d, "proportional", 1.0, partial_rotary_factor=1.0)[0], default(d))
    assert (scaled(d, "proportional", 1.0, partial_rotary_factor=0.0)[0] == 0).all()


def test_yarn_mscale_pair_gives_deepseeks_attention_factor():
    """(0.1 mscale ln s + 1) / (0.1 mscale_all_dim ln s + 1); equal values give exactly 1."""
    s = 40.0
    assert scaled(64, "yarn", s, mscale=1.0, mscale_all_dim=1.0)[1] == 1.0
    want = (0.1 * 0.707 * math.log(s) + 1) / (0.1 * 1.0 * math.log(s) + 1)
    assert scaled(64, "yarn", s, mscale=0.707, mscale_all_dim=1.0)[1] == pytest.approx(want)
    assert scaled(64, "yarn", s, mscale=0.707)[1] == pytest.approx(0.1 * math.log(s) + 1)  # one alone: plain
    assert scaled(64, "yarn", s, mscale=1.0, mscale_all_dim=1.0, attention_factor=1.5)[1] == 1.5
    # the frequencies do not depend on mscale
    torch.testing.assert_close(scaled(64, "yarn", s, mscale=0.707, mscale_all_dim=1.0)[0], scaled(64, "yarn", s)[0])


def test_factor_none_means_max_position_over_original():
    f, att = scaled(64, "yarn", None, original_max_position=4096, max_position=163840)
    g, att40 = scaled(64, "yarn", 40.0, original_max_position=4096)
    torch.testing.assert_close(f, g, rtol=0, atol=0)
    assert att == att40


def test_scaling_options_list_each_methods_knobs():
    assert scaling_options("yarn") == {"beta_fast": 32.0, "beta_slow": 1.0, "truncate": True, "attention_factor": None,
                                       "mscale": None, "mscale_all_dim": None}
    assert scaling_options("llama3") == {"low_freq_factor": 1.0, "high_freq_factor": 4.0}
    assert scaling_options("longrope") == {"short_factor": None, "long_factor": None, "attention_factor": None}
    assert scaling_options("proportional") == {"partial_rotary_factor": 1.0}
    assert scaling_options("linear") == {}


def test_scaled_frequencies_plug_into_apply_rope_and_attention_factor_scales_scores():
    """apply_rope(inv_freq=..., attention_factor=a) multiplies q.k by a**2."""
    inv, att = scaled_rope_frequencies(16, method="yarn", factor=4.0, original_max_position=64)
    q, k = torch.randn(10, 16), torch.randn(10, 16)
    plain = pl.apply_rope(q, inv_freq=inv) @ pl.apply_rope(k, inv_freq=inv).T
    scaled_scores = pl.apply_rope(q, inv_freq=inv, attention_factor=att) @ pl.apply_rope(
        k, inv_freq=inv, attention_factor=att).T
    torch.testing.assert_close(scaled_scores, plain * att**2, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- bad input

def test_unknown_scaling_raises_listing_the_keys():
    with pytest.raises(ValueError, match=r"method must be one of .*'linear'.*'yarn'"):
        scaled_rope_frequencies(16, method="ntk-by-parts", factor=2.0)


@pytest.mark.parametrize("kw,match", [
    (dict(d=15, method="linear", factor=2.0), "d must be even"),
    (dict(d=2, method="ntk", factor=2.0), "d must be >= 4"),
    (dict(d=16, method="linear", factor=0.5), "factor must be a finite number >= 1"),
    (dict(d=16, method="linear", factor=float("inf")), "factor must be"),
    (dict(d=16, method="linear", factor=True), "factor must be"),
    (dict(d=16, method="linear", factor=2.0, base=1.0), "base must be a finite number > 1"),
    (dict(d=16, method="yarn", factor=2.0, original_max_position=0), "original_max_position must be"),
    (dict(d=16, method="dynamic", factor=2.0, seq_len=0), "seq_len must be"),
    (dict(d=16, method="linear", factor=2.0, dtype=torch.float16), "dtype must be"),
    (dict(d=16, method="linear", factor=2.0, beta_fast=3), r"unknown option\(s\) \['beta_fast'\] for method='linear'"),
    (dict(d=16, method="yarn", factor=2.0, beta_fats=3), r"it accepts \['attention_factor', 'beta_fast'"),
    (dict(d=16, method="llama3", factor=2.0, low_freq_factor=4.0, high_freq_factor=1.0), "high_freq_factor >= low"),
    (dict(d=16, method="yarn", factor=None), "factor=None means max_position / original_max_position"),
    (dict(d=16, method="yarn", factor=None, original_max_position=4096, max_position=1024),
     "max_position must be an integer >= 4096"),
    (dict(d=16, method="longrope", factor=2.0, short_factor=[1.0] * 7),
     r"short_factor must be a list of d/2 = 8 numbers \(one per pair\), got length 7"),
    (dict(d=16, method="longrope", factor=2.0, long_factor=3.0), "long_factor must be a list of d/2 = 8 numbers"),
    (dict(d=16, method="longrope", factor=2.0, long_factor=[1.0] * 7 + [float("nan")]),
     "every entry of long_factor must be a finite number > 0"),
    (dict(d=16, method="longrope", factor=2.0, original_max_position=1), "original_max_position must be >= 2"),
    (dict(d=16, method="proportional", factor=1.0, partial_rotary_factor=1.5),
     r"partial_rotary_factor must be a finite number in \[0, 1\]"),
    (dict(d=16, method="proportional", factor=1.0, partial_rotary_factor=-0.5), "partial_rotary_factor must be"),
])
def test_bad_input_raises_value_error(kw, match):
    with pytest.raises(ValueError, match=match):
        scaled_rope_frequencies(**kw)


# ---------------------------------------------------------------- cross-check with Hugging Face

def _hf(method, d, rope_parameters, max_position_embeddings):
    transformers = pytest.importorskip("transformers")
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    heads = 2
    cfg = transformers.LlamaConfig(hidden_size=heads * d, num_attention_heads=heads,
                                   max_position_embeddings=max_position_embeddings,
                                   rope_parameters={"rope_type": method, **rope_parameters})
    return ROPE_INIT_FUNCTIONS[method], cfg


HF_CASES = [(d, s, L0, base) for d in (16, 64, 128) for s in (2.0, 4.0, 8.0, 16.0)
            for (L0, base) in ((64, 10000.0), (2048, 10000.0), (8192, 500000.0))]


@pytest.mark.crosscheck
@pytest.mark.parametrize("d,factor,L0,base", HF_CASES)
@pytest.mark.parametrize("method", ["linear", "yarn", "llama3"])
def test_matches_hf_rope_init_functions(method, d, factor, L0, base):
    """linear, yarn, llama3 equal transformers' ROPE_INIT_FUNCTIONS (inv_freq and attention factor)."""
    params = {"rope_theta": base, "factor": factor}
    if method in ("yarn", "llama3"):
        params["original_max_position_embeddings"] = L0
    if method == "llama3":
        params.update(low_freq_factor=1.0, high_freq_factor=4.0)
    fn, cfg = _hf(method, d, params, max_position_embeddings=int(L0 * factor))
    hf_inv, hf_att = fn(cfg, "cpu")
    ours, att = scaled_rope_frequencies(d, method=method, factor=factor, base=base, original_max_position=L0)
    torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
    assert att == pytest.approx(hf_att, rel=1e-12)


@pytest.mark.crosscheck
@pytest.mark.parametrize("d", [16, 64, 128])
@pytest.mark.parametrize("beta_fast,beta_slow,truncate", [(16.0, 2.0, True), (64.0, 0.5, False)])
def test_yarn_options_match_hf(d, beta_fast, beta_slow, truncate):
    params = {"rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 2048,
              "beta_fast": beta_fast, "beta_slow": beta_slow, "truncate": truncate}
    fn, cfg = _hf("yarn", d, params, max_position_embeddings=8192)
    hf_inv, hf_att = fn(cfg, "cpu")
    ours, att = scaled_rope_frequencies(d, method="yarn", factor=4.0, original_max_position=2048,
                                        beta_fast=beta_fast, beta_slow=beta_slow, truncate=truncate)
    torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
    assert att == pytest.approx(hf_att)


@pytest.mark.crosscheck
@pytest.mark.parametrize("d", [16, 64, 128])
@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
@pytest.mark.parametrize("seq_len", [None, 100, 2048, 3000, 16384])
def test_dynamic_matches_hf(d, factor, seq_len):
    """HF "dynamic" with max_position_embeddings = L0, at several current lengths."""
    fn, cfg = _hf("dynamic", d, {"rope_theta": 10000.0, "factor": factor}, max_position_embeddings=2048)
    hf_inv, hf_att = fn(cfg, "cpu", seq_len=seq_len)
    ours, att = scaled_rope_frequencies(d, method="dynamic", factor=factor, original_max_position=2048,
                                        seq_len=seq_len)
    torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
    assert att == hf_att == 1.0


@pytest.mark.crosscheck
@pytest.mark.parametrize("d", [16, 64, 128])
@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0, 16.0])
def test_ntk_matches_hf_dynamic_at_the_extended_length(d, factor):
    """transformers has no static "ntk" type; its "dynamic" type with factor 1 at seq_len = s * L0
    is exactly base * s**(d/(d-2)), the NTK-aware formula of bloc97's post."""
    L0 = 2048
    fn, cfg = _hf("dynamic", d, {"rope_theta": 10000.0, "factor": 1.0}, max_position_embeddings=L0)
    hf_inv, _ = fn(cfg, "cpu", seq_len=int(L0 * factor))
    ours, att = scaled_rope_frequencies(d, method="ntk", factor=factor, original_max_position=L0)
    torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
    assert att == 1.0


@pytest.mark.crosscheck
@pytest.mark.parametrize("d", [16, 64, 96])
@pytest.mark.parametrize("seq_len", [None, 512, 1024, 1025, 8192])
def test_longrope_matches_hf_below_and_above_L0(d, seq_len):
    """short factors up to L0, long factors above, and sqrt(1 + ln s / ln L0) with s = max / L0 (no factor given)."""
    n = d // 2
    params = {"rope_theta": 10000.0, "original_max_position_embeddings": 1024,
              "short_factor": [1.0 + 0.05 * j for j in range(n)], "long_factor": [1.0 + 0.7 * j for j in range(n)]}
    fn, cfg = _hf("longrope", d, params, max_position_embeddings=32768)
    hf_inv, hf_att = fn(cfg, "cpu", seq_len=seq_len)
    ours, att = scaled_rope_frequencies(d, method="longrope", factor=None, max_position=32768,
                                        original_max_position=1024, seq_len=seq_len,
                                        short_factor=params["short_factor"], long_factor=params["long_factor"])
    torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
    assert att == pytest.approx(hf_att, rel=1e-12)


@pytest.mark.crosscheck
@pytest.mark.parametrize("d", [16, 64, 256])
@pytest.mark.parametrize("p", [0.0, 0.25, 0.5, 1.0])
@pytest.mark.parametrize("factor", [1.0, 4.0])
def test_proportional_matches_hf(d, p, factor):
    fn, cfg = _hf("proportional", d, {"rope_theta": 1e6, "partial_rotary_factor": p, "factor": factor},
                  max_position_embeddings=4096)
    hf_inv, hf_att = fn(cfg, "cpu")
    ours, att = scaled_rope_frequencies(d, method="proportional", factor=factor, base=1e6, partial_rotary_factor=p)
    torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
    assert att == hf_att == 1.0


@pytest.mark.crosscheck
@pytest.mark.parametrize("d", [32, 64])
@pytest.mark.parametrize("mscale,mscale_all_dim", [(1.0, 1.0), (0.707, 1.0), (1.0, 0.707), (0.707, None)])
@pytest.mark.parametrize("factor", [4.0, 40.0, None])
def test_yarn_mscale_and_missing_factor_match_hf(d, mscale, mscale_all_dim, factor):
    """DeepSeek's attention factor, and factor None meaning max_position_embeddings / L0."""
    params = {"rope_theta": 10000.0, "factor": factor, "original_max_position_embeddings": 4096, "mscale": mscale}
    if mscale_all_dim is not None:
        params["mscale_all_dim"] = mscale_all_dim
    fn, cfg = _hf("yarn", d, params, max_position_embeddings=163840)
    hf_inv, hf_att = fn(cfg, "cpu")
    options = {k: params[k] for k in ("mscale", "mscale_all_dim") if k in params}
    ours, att = scaled_rope_frequencies(d, method="yarn", factor=factor, max_position=163840,
                                        original_max_position=4096, **options)
    torch.testing.assert_close(ours, hf_inv, rtol=1e-6, atol=0)
    assert att == pytest.approx(hf_att, rel=1e-12)


@pytest.mark.crosscheck
def test_hf_yarn_is_static():
    """Chapter 8's erratum on Qwen's card: transformers' `yarn` gives the same frequencies whatever the
    input's length (unlike `dynamic`), like the library's."""
    fn, cfg = _hf("yarn", 128, {"rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768},
                  max_position_embeddings=131072)
    short, long = fn(cfg, "cpu", seq_len=100)[0], fn(cfg, "cpu", seq_len=131072)[0]
    torch.testing.assert_close(short, long, rtol=0, atol=0)
    dyn_fn, dyn_cfg = _hf("dynamic", 128, {"rope_theta": 1e6, "factor": 4.0}, max_position_embeddings=32768)
    assert not torch.equal(dyn_fn(dyn_cfg, "cpu", seq_len=100)[0], dyn_fn(dyn_cfg, "cpu", seq_len=131072)[0])
