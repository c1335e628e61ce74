"""RoPE over n-D coordinates (posenc_lib.rope_nd): apply_rope_nd's three styles and mrope_positions."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl

STYLES = ("axial", "contiguous", "interleaved")
LAYOUTS = ("interleaved", "half")


def rope_nd(x, coords, sections, style, layout="interleaved", base=10000.0):
    return pl.apply_rope_nd(x, coords, sections=sections, section_style=style, layout=layout, base=base)


# ---------------------------------------------------------------- which pair reads which axis

def test_pair_axes_by_style_written_out():
    """(2, 1, 1) pairs at d = 8: contiguous t t h w; interleaved t h w t; axial like contiguous."""
    assert pl.rope_nd_axes((2, 1, 1), "contiguous").tolist() == [0, 0, 1, 2]
    assert pl.rope_nd_axes((2, 1, 1), "axial").tolist() == [0, 0, 1, 2]
    assert pl.rope_nd_axes((2, 1, 1), "interleaved").tolist() == [0, 1, 2, 0]
    # Qwen3-VL's (24, 20, 20): t h w repeated 20 times, then the last 4 pairs all to t.
    axes = pl.rope_nd_axes((24, 20, 20), "interleaved").tolist()
    assert axes == [0, 1, 2] * 20 + [0] * 4
    # Qwen2-VL's (16, 24, 24): blocks.
    assert pl.rope_nd_axes((16, 24, 24), "contiguous").tolist() == [0] * 16 + [1] * 24 + [2] * 24


def test_frequencies_one_spectrum_or_one_per_axis():
    torch.testing.assert_close(pl.rope_nd_frequencies((16, 24, 24), "contiguous"), pl.rope_frequencies(128))
    torch.testing.assert_close(pl.rope_nd_frequencies((16, 24, 24), "interleaved"), pl.rope_frequencies(128))
    axial = pl.rope_nd_frequencies((2, 4), "axial")
    torch.testing.assert_close(axial, torch.cat((pl.rope_frequencies(4), pl.rope_frequencies(8))))
    assert axial[0] == axial[2] == 1.0  # each axis starts again at the fastest frequency


# ---------------------------------------------------------------- the properties

offset = st.integers(-40, 40)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("style", STYLES)
@given(a=st.tuples(offset, offset, offset), b=st.tuples(offset, offset, offset),
       shift=st.tuples(offset, offset, offset), seed=st.integers(0, 2**16))
def test_score_depends_only_on_the_offsets(style, layout, a, b, shift, seed):
    """<R(a) q, R(b) k> == <R(a + s) q, R(b + s) k> for any shift s of all three axes."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 24, generator=g, dtype=torch.float64), torch.randn(1, 24, generator=g, dtype=torch.float64)
    sections = (4, 4, 4)

    def score(p, r):
        c = lambda z: torch.tensor([z])  # noqa: E731
        return (rope_nd(q, c(p), sections, style, layout) * rope_nd(k, c(r), sections, style, layout)).sum()

    moved = lambda p: tuple(x + s for x, s in zip(p, shift))  # noqa: E731
    torch.testing.assert_close(score(a, b), score(moved(a), moved(b)))


@pytest.mark.parametrize("style", STYLES)
def test_each_axis_is_told_apart(style):
    """Offsets (1, 0, 0), (0, 1, 0), (0, 0, 1) give three different scores."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 24, generator=g), torch.randn(1, 24, generator=g)
    zero = rope_nd(q, torch.zeros(1, 3, dtype=torch.long), (4, 4, 4), style)
    scores = [(zero * rope_nd(k, torch.eye(3, dtype=torch.long)[i:i + 1], (4, 4, 4), style)).sum() for i in range(3)]
    assert len({round(s.item(), 4) for s in scores}) == 3


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("style,sections", [("contiguous", (16, 24, 24)), ("interleaved", (24, 20, 20))])
def test_text_tokens_at_ppp_are_plain_rope(style, sections, layout):
    x = torch.randn(2, 3, 10, 128)
    p = torch.arange(100, 110)
    coords = p[:, None].expand(10, 3)
    torch.testing.assert_close(rope_nd(x, coords, sections, style, layout), pl.apply_rope(x, p, layout=layout),
                               rtol=0, atol=0)


def test_axial_text_tokens_are_not_plain_rope():
    """Axial spectra restart per axis: (p, p, p) is not 1-D RoPE there."""
    x = torch.randn(10, 24)
    p = torch.arange(1, 11)
    assert not torch.allclose(rope_nd(x, p[:, None].expand(10, 3), (4, 4, 4), "axial"), pl.apply_rope(x, p),
                              atol=1e-3)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_axial_is_one_rope_per_axis_block(layout):
    x = torch.randn(5, 20, dtype=torch.float64)
    coords = torch.randint(-9, 9, (5, 3))
    out = rope_nd(x, coords, (2, 3, 5), "axial", layout)
    for i, (lo, hi) in enumerate([(0, 4), (4, 10), (10, 20)]):
        torch.testing.assert_close(out[:, lo:hi], pl.apply_rope(x[:, lo:hi], coords[:, i], layout=layout))


@pytest.mark.parametrize("style", STYLES)
def test_preserves_norm_batched_coords_and_dtype(style):
    x = torch.randn(2, 4, 6, 16, dtype=torch.bfloat16)
    coords = torch.randint(0, 9, (2, 6, 2))
    out = rope_nd(x, coords, (5, 3), style)
    assert out.shape == x.shape and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float().norm(dim=-1), x.float().norm(dim=-1), rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(out[1:], rope_nd(x[1:], coords[1], (5, 3), style))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("style", STYLES)
def test_the_options_every_rope_entry_point_takes(style, layout):
    """inv_freq, attention_factor and rotary_dim mean what they mean in apply_rope."""
    g = torch.Generator().manual_seed(4)
    x, coords = torch.randn(2, 7, 20, generator=g), torch.randint(0, 30, (7, 2), generator=g)
    sections = (2, 2)  # r = 8 of the d = 20 features
    kw = dict(sections=sections, section_style=style, layout=layout)
    part = pl.apply_rope_nd(x, coords, rotary_dim=8, attention_factor=1.5, **kw)
    assert torch.equal(part[..., 8:], x[..., 8:])  # the rest passes through
    torch.testing.assert_close(part[..., :8], 1.5 * pl.apply_rope_nd(x[..., :8].contiguous(), coords, **kw))
    inv = pl.rope_nd_frequencies(sections, style, base=50.0)
    torch.testing.assert_close(pl.apply_rope_nd(x[..., :8], coords, inv_freq=inv, **kw),
                               pl.apply_rope_nd(x[..., :8], coords, base=50.0, **kw))
    if style != "axial":  # text at (p, p): one spectrum, so apply_rope's with the same frequencies
        p = torch.arange(7)
        torch.testing.assert_close(pl.apply_rope_nd(x, p[:, None].expand(7, 2), rotary_dim=8, inv_freq=inv, **kw),
                                   pl.apply_rope(x, p, rotary_dim=8, inv_freq=inv, layout=layout))
    with pytest.raises(ValueError, match=r"sections must sum to rotary_dim / 2 = 4"):
        pl.apply_rope_nd(x, coords, rotary_dim=8, sections=(2, 3))
    with pytest.raises(ValueError, match=r"inv_freq must have shape \(4,\)"):
        pl.apply_rope_nd(x, coords, rotary_dim=8, inv_freq=torch.ones(3), sections=sections)


def test_gradient_reaches_x():
    x = torch.randn(3, 8, requires_grad=True)
    rope_nd(x, torch.randint(0, 5, (3, 2)), (2, 2), "interleaved").sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0


# ---------------------------------------------------------------- mrope_positions

def test_mrope_positions_written_out():
    """Text 0..1; a 2 x 3 image from 2 (one time step); text from 2 + max(0, 1, 2) + 1 = 5; a video."""
    pos = pl.mrope_positions([("text", 2), ("image", (2, 3)), ("text", 1), ("video", (2, 1, 2)), ("text", 1)])
    want = ([(0, 0, 0), (1, 1, 1)]
            + [(2, 2 + i, 2 + j) for i in range(2) for j in range(3)]
            + [(5, 5, 5)]
            + [(6 + t, 6, 6 + j) for t in range(2) for j in range(2)]
            + [(8, 8, 8)])
    assert pos.tolist() == [list(p) for p in want] and pos.dtype == torch.long


def test_mrope_positions_long_video_continues_after_its_last_frame():
    """A video of 5 frames over a 1 x 2 grid: the text after it starts at t_last + 1 = 5."""
    pos = pl.mrope_positions([("video", (5, 1, 2)), ("text", 2)])
    assert pos[-2:].tolist() == [[5, 5, 5], [6, 6, 6]]


def test_mrope_positions_spatial_merge_counts_merged_tokens():
    pos = pl.mrope_positions([("image", (4, 6)), ("text", 1)], spatial_merge=2)
    assert pos.shape == (2 * 3 + 1, 3)
    assert pos[:6, 1].tolist() == [0, 0, 0, 1, 1, 1] and pos[:6, 2].tolist() == [0, 1, 2, 0, 1, 2]
    assert pos[-1].tolist() == [3, 3, 3]


def test_mrope_positions_seconds_qwen25_example():
    """transformers' Qwen2.5-VL docstring: 3 temporal patches x 2 x 2 at fps 1, tokens_per_second 25,
    temporal_patch_size 2: t = [0]*4 + [50]*4 + [100]*4, and the text after it starts at 101."""
    pos = pl.mrope_positions([("video", (3, 2, 2), 2.0), ("text", 5)], tokens_per_second=25)
    assert pos[:12, 0].tolist() == [0] * 4 + [50] * 4 + [100] * 4
    assert pos[:12, 1].tolist() == [0, 0, 1, 1] * 3 and pos[:12, 2].tolist() == [0, 1, 0, 1] * 3
    assert pos[12:, 0].tolist() == [101, 102, 103, 104, 105]
    # Images stay one time step; without tokens_per_second the seconds are ignored (Qwen2-VL).
    assert pl.mrope_positions([("image", (2, 2))], tokens_per_second=25)[:, 0].tolist() == [0] * 4
    assert pl.mrope_positions([("video", (3, 1, 1), 2.0)])[:, 0].tolist() == [0, 1, 2]


def test_mrope_positions_feed_apply_rope_nd():
    pos = pl.mrope_positions([("text", 3), ("image", (2, 2)), ("text", 2)])
    x = torch.randn(2, pos.shape[0], 16)
    out = rope_nd(x, pos, (2, 3, 3), "contiguous", "half")
    torch.testing.assert_close(out[:, :3], pl.apply_rope(x[:, :3], pos[:3, 0], layout="half"))


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("kw,match", [
    (dict(sections=(4, 4, 4)), r"sections must sum to x.shape\[-1\] / 2 = 8 .* got \(4, 4, 4\) \(sum 12\)"),
    (dict(sections=(4, 0, 4)), r"sections\[1\] must be an integer >= 1, got 0"),
    (dict(sections=4), "sections must be a non-empty sequence"),
    (dict(sections=()), "sections must be a non-empty sequence"),
    (dict(sections=(4, 4), section_style="spiral"), "section_style must be one of .* got 'spiral'"),
    (dict(sections=(4, 4), layout="zigzag"), "layout must be one of"),
    (dict(sections=(4, 4), base=1.0), "base must be a finite number > 1"),
    (dict(sections=(1, 7), section_style="interleaved"), r"sections\[1\] = 7 is too many for the interleaved"),
])
def test_bad_arguments_raise_value_error(kw, match):
    with pytest.raises(ValueError, match=match):
        pl.apply_rope_nd(torch.randn(5, 16), torch.zeros(5, 2, dtype=torch.long), **kw)


@pytest.mark.parametrize("x,coords,match", [
    (torch.randn(5, 16), torch.zeros(5, 3, dtype=torch.long), r"coords must have shape \(5, 2\) or \(batch, 5, 2\)"),
    (torch.randn(5, 16), torch.zeros(5, 2), "coords must have an integer dtype"),
    (torch.randn(5, 16), [[0, 0]] * 5, "coords must be an integer tensor"),
    (torch.randn(5, 16), torch.zeros(4, 2, dtype=torch.long), r"coords.shape\[-2\] must be the sequence length"),
    (torch.randn(2, 5, 16), torch.zeros(3, 5, 2, dtype=torch.long), "batched coords of shape"),
    (torch.randn(5, 15), torch.zeros(5, 2, dtype=torch.long), "must be even"),
    (torch.randn(16), torch.zeros(5, 2, dtype=torch.long), "x must be a tensor of shape"),
])
def test_bad_tensors_raise_value_error(x, coords, match):
    with pytest.raises(ValueError, match=match):
        pl.apply_rope_nd(x, coords, sections=(4, 4))


@pytest.mark.parametrize("segments,kw,match", [
    ([], {}, "segments must be a non-empty list"),
    ([("audio", 3)], {}, r"segments\[0\] must be \('text', n\)"),
    ([("text", 2), ("image", (2, 2, 2))], {}, r"segments\[1\]: a image needs a size of 2 integers"),
    ([("text", 0)], {}, r"segments\[0\] length must be an integer >= 1"),
    ([("image", (3, 4))], dict(spatial_merge=2), r"segments\[0\]: h and w must be multiples of spatial_merge=2"),
    ([("text", 2)], dict(spatial_merge=0), "spatial_merge must be an integer >= 1"),
    ([("text", 2)], dict(tokens_per_second=0), "tokens_per_second must be a finite number > 0"),
    ([("video", (2, 1, 1), -1.0)], dict(tokens_per_second=2), r"segments\[0\] seconds must be a finite number > 0"),
    ([("video", (2, 1, 1), "1s")], {}, r"segments\[0\] seconds must be a finite number > 0"),
])
def test_bad_segments_raise_value_error(segments, kw, match):
    with pytest.raises(ValueError, match=match):
        pl.mrope_positions(segments, **kw)


# ---------------------------------------------------------------- cross-checks

def flux_rope(pos, dim, theta):
    """Flux's EmbedND per axis, restated: (n, dim/2, 2, 2) rotation matrices of angle pos * theta^(-2j/dim)."""
    omega = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    a = pos.double()[:, None] * omega
    return torch.stack([a.cos(), -a.sin(), a.sin(), a.cos()], -1).view(*a.shape, 2, 2)


def flux_apply(x, coords, axes_dim, theta):
    """Concatenate the axes' matrices along the pairs; each pair (2j, 2j + 1) is multiplied by its matrix."""
    mats = torch.cat([flux_rope(coords[:, i], d, theta) for i, d in enumerate(axes_dim)], dim=-3)
    pairs = x.double().unflatten(-1, (-1, 2))
    return (mats @ pairs.unsqueeze(-1)).squeeze(-1).flatten(-2).to(x.dtype)


@pytest.mark.crosscheck
def test_axial_matches_a_flux_style_embed_nd():
    """Flux: axes_dim (16, 56, 56), theta 10000, interleaved pairs over (id, row, col)."""
    x = torch.randn(2, 3, 20, 128, dtype=torch.float64)
    coords = torch.stack([torch.zeros(20, dtype=torch.long), *pl.axial_positions(4, 5)], -1)
    want = flux_apply(x, coords, (16, 56, 56), 10000.0)
    torch.testing.assert_close(rope_nd(x, coords, (8, 28, 28), "axial"), want)


def _qwen_rotary(model: str, sections, theta, head_dim=128):
    pytest.importorskip("transformers")
    params = {"rope_type": "default", "rope_theta": theta, "mrope_section": list(sections)}
    if model == "qwen2_vl":
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding
        return Qwen2VLRotaryEmbedding(Qwen2VLTextConfig(hidden_size=2 * head_dim, num_attention_heads=2,
                                                        rope_parameters=params))
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding
    return Qwen3VLTextRotaryEmbedding(Qwen3VLTextConfig(hidden_size=2 * head_dim, num_attention_heads=2,
                                                        head_dim=head_dim, rope_parameters=params))


@pytest.mark.crosscheck
@pytest.mark.parametrize("model,style,sections,theta", [
    ("qwen2_vl", "contiguous", (16, 24, 24), 1000000.0),
    ("qwen3_vl", "interleaved", (24, 20, 20), 5000000.0),
])
def test_matches_transformers_qwen_multimodal_rotary(model, style, sections, theta):
    """Qwen2-VL's mrope_section (contiguous) and Qwen3-VL's interleaved MRoPE, half layout."""
    rotary = _qwen_rotary(model, sections, theta)
    from transformers.models.qwen2_vl.modeling_qwen2_vl import apply_rotary_pos_emb

    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 4, 30, 128, generator=g), torch.randn(2, 4, 30, 128, generator=g)
    coords = torch.stack([pl.mrope_positions([("text", 3), ("video", (2, 4, 6)), ("text", 15)], spatial_merge=2),
                          pl.mrope_positions([("image", (4, 8)), ("text", 22)], spatial_merge=2)])  # (2, 30, 3)
    cos, sin = rotary(q, coords.permute(2, 0, 1))
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
    # float32 angles up to ~30 rad on both sides; HF rounds 1/base**x, we base**-x (see test_crosscheck.py).
    kw = dict(sections=sections, base=theta, layout="half", section_style=style)
    torch.testing.assert_close(pl.apply_rope_nd(q, coords, **kw), hq, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(pl.apply_rope_nd(k, coords, **kw), hk, atol=1e-4, rtol=1e-5)
    other = {"contiguous": "axial", "interleaved": "contiguous"}[style]  # the allocation matters
    assert not torch.allclose(pl.apply_rope_nd(q, coords, **{**kw, "section_style": other}), hq, atol=1e-2)


def _types_and_grids(segments, merge):
    """mm_token_type_ids (1, seq) (text 0, image 1, video 2) and the image and video grids (t, h, w)."""
    types, images, videos = [], [], []
    for kind, size, *_ in segments:
        if kind == "text":
            types += [0] * size
        else:
            t, h, w = (1, *size) if kind == "image" else size
            (images if kind == "image" else videos).append([t, h, w])
            types += [1 if kind == "image" else 2] * (t * h * w // merge ** 2)
    return torch.tensor([types]), images, videos


def _hf_rope_index(model, types, images, videos, merge, tokens_per_second=None, seconds=None, with_deltas=False):
    """transformers' get_rope_index (the model class's method, on a config alone: no weights).

    returns (seq, 3) position ids; with_deltas: also the returned mrope_position_deltas (one int per batch row)."""
    pytest.importorskip("transformers")
    if model == "qwen2_vl":
        from transformers import Qwen2VLConfig as Config
        from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel as Model
    elif model == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig as Config
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel as Model
    else:
        from transformers import Qwen3VLConfig as Config
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel as Model
    vision = {"spatial_merge_size": merge}
    if tokens_per_second is not None:
        vision["tokens_per_second"] = tokens_per_second

    class Bare:  # the two methods get_rope_index uses, and a config
        get_rope_index = Model.get_rope_index
        get_vision_position_ids = Model.get_vision_position_ids
        config = Config(vision_config=vision)

    kw = dict(image_grid_thw=torch.tensor(images) if images else None,
              video_grid_thw=torch.tensor(videos) if videos else None)
    if seconds is not None:
        kw["second_per_grid_ts"] = torch.tensor(seconds)
    pos, deltas = Bare().get_rope_index(torch.zeros_like(types), mm_token_type_ids=types, **kw)
    return (pos[:, 0].T, deltas.flatten().tolist()) if with_deltas else pos[:, 0].T  # (seq, 3)


# Vision segments separated by text (as the processors' vision start/end tokens do); videos with
# t <= max(h, w) / merge, where transformers 5.x's advance by max(h, w) equals the max + 1 rule.
MIXED = [("text", 4), ("image", (4, 6)), ("text", 3), ("video", (3, 4, 4)), ("text", 2), ("image", (2, 2)),
         ("text", 1)]


@pytest.mark.crosscheck
@pytest.mark.parametrize("merge", [1, 2])
@pytest.mark.parametrize("model", ["qwen2_vl", "qwen2_5_vl"])
def test_mrope_positions_match_transformers_get_rope_index(model, merge):
    segments = MIXED if merge == 1 else [s for s in MIXED if s[0] != "video"] + [("video", (2, 4, 4)), ("text", 2)]
    qwen25 = dict(tokens_per_second=1, seconds=[1.0]) if model == "qwen2_5_vl" else {}
    hf = _hf_rope_index(model, *_types_and_grids(segments, merge), merge, **qwen25)
    assert torch.equal(pl.mrope_positions(segments, spatial_merge=merge), hf)


@pytest.mark.crosscheck
@pytest.mark.parametrize("seconds,tps,t", [(0.5, 2, 4), (2.0, 25, 3)])
def test_mrope_positions_match_transformers_qwen25_seconds_for_the_vision_tokens(seconds, tps, t):
    """Qwen2.5-VL, t counting time: 4 temporal patches of 0.5 s at 2 tokens per second -> t = 0, 1, 2, 3;
    3 of 2 s at 25 tokens per second -> 0, 50, 100 (the video last: no text follows it, see the module note)."""
    segments = [("text", 3), ("video", (t, 2, 2), seconds)]
    hf = _hf_rope_index("qwen2_5_vl", *_types_and_grids(segments, 1), 1, tokens_per_second=tps, seconds=[seconds])
    assert torch.equal(pl.mrope_positions(segments, tokens_per_second=tps), hf)


@pytest.mark.crosscheck
def test_mrope_positions_match_transformers_qwen3_vl_frames_with_timestamps():
    """Qwen3-VL: a video of 2 frames is two (1, h, w) grids, each after its timestamp in text."""
    segments = [("text", 2), ("image", (4, 4)), ("text", 3), ("video", (1, 4, 6)), ("text", 3), ("video", (1, 4, 6)),
                ("text", 2)]
    types, images, _ = _types_and_grids(segments, 2)
    hf = _hf_rope_index("qwen3_vl", types, images, [[2, 4, 6]], 2)  # transformers splits the video itself
    assert torch.equal(pl.mrope_positions(segments, spatial_merge=2), hf)


@pytest.mark.crosscheck
@pytest.mark.parametrize("model", ["qwen2_vl", "qwen2_5_vl"])
def test_transformers_text_after_a_long_video_falls_among_its_ids(model):
    """Chapter 9's errata: one text token, a video of 6 temporal patches of 2 x 2 tokens, 2 text tokens.

    The video sits at t = 1..6. transformers 5.x starts the text after it at s + max(h, w) = 1 + 2 = 3,
    inside the video's time ids; the max + 1 rule (pl.mrope_positions) at 7. Yet the deltas the same
    get_rope_index returns place the next generated token at max + 1 = 7, not after its own text (5)."""
    segments = [("text", 1), ("video", (6, 2, 2)), ("text", 2)]
    qwen25 = dict(tokens_per_second=1, seconds=[1.0]) if model == "qwen2_5_vl" else {}  # t advances 1 per patch
    hf, deltas = _hf_rope_index(model, *_types_and_grids(segments, 1), 1, with_deltas=True, **qwen25)
    ours = pl.mrope_positions(segments)
    assert torch.equal(hf[:25], ours[:25])  # the text token and the video agree
    assert hf[1:25, 0].unique().tolist() == [1, 2, 3, 4, 5, 6]
    assert hf[25:].tolist() == [[3, 3, 3], [4, 4, 4]]  # transformers: s + max(h, w)
    assert ours[25:].tolist() == [[7, 7, 7], [8, 8, 8]]  # ours: one past the video's largest id
    assert hf.shape[0] == 27 and hf.shape[0] + deltas[0] == 7  # next token (index 27) at max + 1 = 7
