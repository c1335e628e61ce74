"""RoPE analysis formulas (posenc_lib.rope_analysis)."""
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl
from posenc_lib import rope_analysis as ra


def test_wavelengths_span_two_pi_to_two_pi_base():
    """2 pi / theta_j: 2 pi for the first pair, 2 pi base^(1 - 2/d) for the last."""
    w = ra.rope_wavelengths(128, base=10000.0)
    assert w.shape == (64,) and w.dtype == torch.float64
    assert w[0].item() == pytest.approx(2 * math.pi)
    assert w[-1].item() == pytest.approx(2 * math.pi * 10000.0 ** (1 - 2 / 128))
    assert bool((w.diff() > 0).all())


def test_partial_sums_are_cumulative_phase_sums():
    """S_j = sum_{k<j} e^{i r theta_k}, checked against a plain loop."""
    d, base = 8, 100.0
    S = ra.rope_partial_sums(torch.tensor([0, 5, -3]), d, base=base)
    assert S.shape == (3, 4) and S.dtype == torch.complex128
    for i, r in enumerate([0, 5, -3]):
        acc = 0j
        for j in range(d // 2):
            acc += complex(math.cos(r * base ** (-2 * j / d)), math.sin(r * base ** (-2 * j / d)))
            assert abs(S[i, j].item() - acc) < 1e-12


def test_decay_bound_at_zero_and_decreasing_trend():
    """At r = 0 every |S_j| = j, so the mean is (d/2 + 1)/2; far away it is much smaller."""
    b = ra.rope_decay_bound(512, 128)
    assert b.shape == (512,)
    assert b[0].item() == pytest.approx((64 + 1) / 2)
    assert b[256:].mean() < 0.3 * b[0]


def test_int_distances_mean_zero_to_n_minus_one():
    """An int n means r = 0..n-1, like positions elsewhere in the library."""
    torch.testing.assert_close(ra.rope_decay_bound(6, 8), ra.rope_decay_bound(torch.arange(6), 8))


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_scores_by_distance_match_apply_rope(layout):
    """out[..., i] == <apply_rope(q, m), apply_rope(k, m - r_i)> for any m."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(4, 16, dtype=torch.float64, generator=g), torch.randn(4, 16, dtype=torch.float64, generator=g)
    r = torch.tensor([0, 1, -9, 250])
    s = ra.rope_scores_by_distance(q, k, r, layout=layout, base=500.0)
    assert s.shape == (4, 4) and s.dtype == torch.float64
    m = 300
    for i, ri in enumerate(r.tolist()):
        qm = pl.apply_rope(q[:, None], torch.tensor([m]), layout=layout, base=500.0)[:, 0]
        kn = pl.apply_rope(k[:, None], torch.tensor([m - ri]), layout=layout, base=500.0)[:, 0]
        torch.testing.assert_close(s[:, i], (qm * kn).sum(-1))


def test_scores_at_zero_distance_are_plain_dot_products():
    """R_m^T R_m = I: at r = 0 the score is q . k."""
    q, k = torch.randn(3, 8), torch.randn(3, 8)
    torch.testing.assert_close(ra.rope_scores_by_distance(q, k, 1)[:, 0], (q * k).sum(-1).double(), atol=1e-5, rtol=0)


@given(half_d=st.integers(1, 32), seed=st.integers(0, 2**16), r=st.integers(-5000, 5000))
def test_abel_bound_holds_and_abel_identity_is_exact(half_d, seed, r):
    """|sum h_j e^{i r theta_j}| <= bound; and the sum equals -sum S_{j+1}(h_{j+1} - h_j)."""
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(3, half_d, dtype=torch.complex128, generator=g)
    dist = torch.tensor([r])
    total = ra.rope_complex_scores(h, dist)[..., 0]
    assert bool((total.abs() <= ra.rope_abel_bound(h, dist)[..., 0] + 1e-9).all())
    S = ra.rope_partial_sums(dist, 2 * half_d)[0]  # S_1 .. S_{d/2}
    padded = torch.cat((h, torch.zeros_like(h[..., :1])), -1)
    torch.testing.assert_close(total, -(S * padded.diff(dim=-1)).sum(-1))


def test_pair_products_follow_layout():
    """Interleaved pairs (2j, 2j+1); half pairs (j, j + d/2)."""
    q = torch.tensor([1.0, 2.0, 3.0, 4.0])
    k = torch.tensor([1.0, 0.0, 0.0, 1.0])
    torch.testing.assert_close(ra.rope_pair_products(q, k), torch.tensor([1 + 2j, 4 - 3j], dtype=torch.complex64))
    torch.testing.assert_close(ra.rope_pair_products(q, k, layout="half"), torch.tensor([1 + 3j, 4 - 2j], dtype=torch.complex64))


def test_angle_error_float32_is_what_rope_angles_makes():
    """The float32 branch measures exactly the error of the library's float32 grid."""
    pos = torch.tensor([1, 100, 4096, 100_000])
    exact = pl.rope_angles(pos, 64, inv_freq=pl.rope_frequencies(64, dtype=torch.float64))
    want = (pl.rope_angles(pos, 64).double() - exact).abs()
    torch.testing.assert_close(ra.rope_angle_error(pos, 64, dtype=torch.float32), want)


def test_angle_error_bf16_is_large_and_fp16_overflows():
    """bf16 angles are off by radians at 1e4; fp16 cannot hold position 70000 (nan)."""
    pos = torch.tensor([10_000, 70_000])
    bf = ra.rope_angle_error(pos, 64, dtype=torch.bfloat16)
    assert bf.shape == (2, 32) and bf.dtype == torch.float64
    assert bf[0].max() > 1.0 and bool((bf <= math.pi + 1e-12).all())
    fp = ra.rope_angle_error(pos, 64, dtype=torch.float16)
    assert not torch.isnan(fp[0]).any() and torch.isnan(fp[1]).all()
    assert ra.rope_angle_error(pos, 64, dtype=torch.float32).max() < 1e-2



@pytest.mark.parametrize(
    "theta, trained, length, inv_freq, want",
    [
        (math.pi / 2, 2, 4, None, math.pi / 2),  # seen {0, pi/2}; pi and 3 pi/2 are a quarter turn away
        (math.pi / 2, 4, 100, None, 0.0),  # a full turn seen: every later angle repeats one
        (0.1, 10, 15, None, 0.5),  # seen up to 0.9, asked up to 1.4
        (0.1, 10, 20, 0.05, 0.05),  # PI with s = 2: up to 19 * 0.05 = 0.95, one half-step past 0.9
        (1.0, 3, 5, None, 2.0),  # seen {0, 1, 2}; 4 is 2 from 2 and 2 pi - 4 > 2 from 0 (the wrap)
    ],
)
def test_angle_novelty_by_hand(theta, trained, length, inv_freq, want):
    """The largest distance from an asked angle to the nearest trained one, on the circle."""
    new = None if inv_freq is None else torch.tensor([inv_freq], dtype=torch.float64)
    got = ra.rope_angle_novelty(torch.tensor([theta], dtype=torch.float64), trained, length, inv_freq=new)
    assert got.shape == (1,) and got.dtype == torch.float64
    assert got.item() == pytest.approx(want, abs=1e-12)


def test_angle_novelty_inside_the_training_length_is_zero_and_pairs_are_independent():
    theta = pl.rope_frequencies(16, dtype=torch.float64)
    assert ra.rope_angle_novelty(theta, 50, 50).abs().max() == 0
    both = ra.rope_angle_novelty(theta, 50, 400)
    assert [ra.rope_angle_novelty(theta[j:j + 1], 50, 400).item() for j in range(8)] == both.tolist()
    assert both[0] < theta[0] == 1 and both[-1] > 100 * theta[-1]  # pair 0 wrapped in training, pair 7 did not


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: ra.rope_wavelengths(7), "d must be even"),
        (lambda: ra.rope_partial_sums(4, 8, base=1.0), "base must be a finite number > 1"),
        (lambda: ra.rope_decay_bound(torch.zeros(2, 3, dtype=torch.long), 8), "distances must be"),
        (lambda: ra.rope_decay_bound(torch.tensor([0.5]), 8), "positions must have an integer dtype"),
        (lambda: ra.rope_pair_products(torch.randn(4), torch.randn(6)), r"k.shape\[-1\] must be 4"),
        (lambda: ra.rope_pair_products(torch.randn(5), torch.randn(5)), "must be even"),
        (lambda: ra.rope_pair_products(torch.randn(4), torch.randn(4), layout="x"), "layout must be one of"),
        (lambda: ra.rope_complex_scores(torch.randn(4), 3), "h must be a complex tensor"),
        (lambda: ra.rope_abel_bound(torch.randn(4), 3), "h must be a complex tensor"),
        (lambda: ra.rope_angle_error(4, 8, dtype=torch.float64), "dtype must be one of"),
        (lambda: ra.rope_angle_error(-1, 8), "positions must be an integer >= 0"),
        (lambda: ra.rope_angle_novelty(torch.ones(2, 2), 4, 8), "trained_inv_freq must be a non-empty 1-D"),
        (lambda: ra.rope_angle_novelty(torch.tensor([-1.0]), 4, 8), "trained_inv_freq must hold finite"),
        (lambda: ra.rope_angle_novelty(torch.ones(2), 4, 8, inv_freq=torch.ones(3)), "inv_freq must have the shape"),
        (lambda: ra.rope_angle_novelty(torch.ones(2), 0, 8), "trained_length must be"),
        (lambda: ra.rope_angle_novelty(torch.ones(2), 4, 2.5), "length must be"),
        (lambda: ra.rope_combination_gap(torch.ones(2), (3, 1), torch.arange(4)), "trained_span must be"),
        (lambda: ra.rope_combination_gap(torch.ones(2), (0, 3), torch.ones(2, 2)), "distances must be a 1-D"),
        (lambda: ra.rope_combination_gap(torch.ones(2), (0, 3), torch.tensor([-1.0])), "distances must hold"),
        (lambda: ra.rope_combination_gap(torch.ones(2), (0, 3), torch.arange(4), inv_freq=torch.ones(3)),
         "inv_freq must have the shape"),
        (lambda: ra.rope_combination_gap(torch.ones(2), (0, 3), torch.arange(4), step=0), "step must be"),
    ],
)
def test_bad_input_raises_value_error_naming_the_parameter(call, match):
    """Bad arguments raise ValueError that says which and what was expected."""
    with pytest.raises(ValueError, match=match):
        call()


def _gap_by_hand(theta, span, r, new, step=0.01):
    """min over rho in span of the largest wrapped difference over the pairs, with plain Python loops."""
    best = math.inf
    rho = span[0]
    while rho <= span[1] + 1e-12:
        worst = max(abs((r * n - rho * t + math.pi) % (2 * math.pi) - math.pi) for t, n in zip(theta, new))
        best, rho = min(best, worst), rho + step
    return best


def test_combination_gap_by_hand():
    """One pair: the distance from an angle to an arc. Two pairs stretched by different factors: each pair stays on
    its own trained range, the combination does not. A uniform stretch (PI) stays on the curve."""
    one = ra.rope_combination_gap(torch.tensor([0.1], dtype=torch.float64), (0, 10), torch.tensor([20]))
    assert one.item() == pytest.approx(1.0, abs=1e-9)  # angle 2.0 against the arc [0, 1]
    theta = torch.tensor([0.3, 0.1], dtype=torch.float64)
    mixed = theta / torch.tensor([1.0, 2.0], dtype=torch.float64)  # pair 1 slowed, pair 0 not
    r = torch.tensor([5, 17, 29])
    got = ra.rope_combination_gap(theta, (0, 20), r, inv_freq=mixed)
    want = [_gap_by_hand(theta.tolist(), (0, 20), x, mixed.tolist()) for x in r.tolist()]
    assert got.tolist() == pytest.approx(want, abs=1e-9) and got.max() > 0.5
    assert (ra.rope_angle_novelty(theta, 21, 30, inv_freq=mixed) <= theta).all()  # each pair: nothing new
    pi = ra.rope_combination_gap(theta, (0, 20), torch.arange(0, 41), inv_freq=theta / 2)
    assert pi.max() < 0.3 * 0.01  # r / 2 lies on the curve, to within the grid
    assert ra.rope_combination_gap(theta, (0, 20), torch.arange(21)).max() < 0.3 * 0.01
