"""Device and dtype propagation, tested on the meta device (no GPU needed)."""
import pytest
import torch

import posenc_lib as pl

META = torch.device("meta")


@pytest.mark.parametrize(
    "make",
    [
        lambda: pl.integer_positions(5, 4, device=META),
        lambda: pl.binary_positions(5, 4, device=META),
        lambda: pl.sinusoidal_positions(5, 4, device=META),
        lambda: pl.rope_frequencies(8, device=META),
        lambda: pl.rope_angles(5, 8, device=META),
        lambda: pl.rope_matrix(3, 8, device=META),
        lambda: pl.alibi_slopes(4, device=META),
        lambda: pl.alibi_bias(4, 5, device=META),
        lambda: pl.relative_positions(3, 4, device=META),
        lambda: pl.clipped_relative_positions(3, 4, 2, device=META),
    ],
)
def test_constructors_honour_device(make):
    assert make().device.type == "meta"


@pytest.mark.parametrize("layout", ["interleaved", "half"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_apply_rope_follows_input_device_and_dtype(layout, dtype):
    x = torch.empty(2, 3, 5, 8, device=META, dtype=dtype)
    out = pl.apply_rope(x, layout=layout)
    assert out.device.type == "meta" and out.dtype == dtype and out.shape == x.shape


def test_modules_move_their_buffers():
    """Non-persistent buffers follow .to(device)."""
    for module, name in [
        (pl.RotaryEmbedding(8), "inv_freq"),
        (pl.ALiBi(4), "slopes"),
        (pl.SinusoidalPositionalEncoding(8, 16), "pe"),
    ]:
        assert getattr(module.to(META), name).device.type == "meta"
    rot = pl.RotaryEmbedding(8).to(META)
    q = torch.empty(1, 2, 4, 8, device=META)
    assert all(t.device.type == "meta" for t in rot(q, q))
    t5 = pl.T5RelativeBias(2, num_buckets=8, max_distance=16).to(META)
    assert t5(3, 4).device.type == "meta"


def test_attention_follows_device():
    q = torch.empty(1, 2, 4, 8, device=META)
    out, w = pl.attention(q, q, q, bias=torch.empty(2, 4, 4, device=META))
    assert out.device.type == "meta" and w.shape == (1, 2, 4, 4)


def test_chapters_compute_on_the_cpu_unless_the_learner_opts_in(monkeypatch):
    """default_device() is the CPU on any machine (the stored outputs' device); POSENC_DEVICE opts in."""
    monkeypatch.delenv("POSENC_DEVICE", raising=False)
    assert pl.default_device() == torch.device("cpu")
    for value in ("", "cpu", " CPU "):
        monkeypatch.setenv("POSENC_DEVICE", value)
        assert pl.default_device() == torch.device("cpu")
    monkeypatch.setenv("POSENC_DEVICE", "auto")
    expected = "cuda" if torch.cuda.is_available() else ("mps" if torch.backends.mps.is_available() else "cpu")
    assert pl.default_device().type == expected == pl.best_device().type
    monkeypatch.setenv("POSENC_DEVICE", "meta")  # any device torch knows and this machine has
    assert pl.default_device() == META


@pytest.mark.parametrize("value, words", [("gpu", "cpu, auto, cuda[:N] or mps"), ("cuda", "does not have"),
                                           ("mps", "does not have")])
def test_an_unusable_posenc_device_is_refused_by_name(monkeypatch, value, words):
    if value == "cuda" and torch.cuda.is_available() or value == "mps" and torch.backends.mps.is_available():
        pytest.skip(f"this machine has {value}")
    monkeypatch.setenv("POSENC_DEVICE", value)
    with pytest.raises(ValueError, match="POSENC_DEVICE") as e:
        pl.default_device()
    assert words in str(e.value)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_get_float32_angles(dtype):
    """Angles for bf16/fp16 inputs at positions up to 1e6 are as accurate as float32 ones."""
    pos = torch.tensor([1, 1000, 65_000, 999_999])
    d = 64
    exact = pos.double()[:, None] * pl.rope_frequencies(d, dtype=torch.float64)
    x = torch.ones(4, d, dtype=dtype)
    ours = pl.apply_rope(x, pos).double()
    # Compare the rotated first pair (1, 1) against float64 maths: error stays at float32 level.
    want = torch.stack((exact.cos() - exact.sin(), exact.sin() + exact.cos()), -1).flatten(-2)
    err_ours = (ours - want).abs().max().item()
    # What computing the angles in the input dtype would give:
    naive = (pos.to(dtype)[:, None] * pl.rope_frequencies(d).to(dtype)).double()
    err_naive = (naive - exact).abs().max().item()
    assert err_naive > 1.0  # half-precision angles are off by radians at these positions
    # ours: float32 angle error (|angle| * 2**-24 ~ 0.06 rad at 1e6) plus the final cast to dtype
    assert err_ours < 0.1


def test_float32_angles_match_float64_to_float32_precision():
    pos = torch.tensor([999_999])
    a32 = pl.rope_angles(pos, 64).double()
    a64 = pos.double()[:, None] * pl.rope_frequencies(64, dtype=torch.float64)
    assert ((a32 - a64).abs() <= a64.abs() * 2**-23 + 1e-12).all()
