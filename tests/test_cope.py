"""Contextual Position Encoding (posenc_lib.cope): positions counted by gates."""
import math

import pytest
import torch

import posenc_lib as pl
from posenc_lib.model import KVCache, TinyDecoder

INF = float("inf")


def causal_logits(gate_logits):
    """Mask the future keys of a square (..., n, n) logit grid with -inf."""
    n = gate_logits.shape[-1]
    return gate_logits.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -INF)


def naive_positions(logits):
    """p_ij = sum_{t=j..i} sigmoid(logits[i, t]), by loops over one (q_len, k_len) grid (keys past i are masked)."""
    q_len, k_len = logits.shape
    p = torch.zeros(q_len, k_len, dtype=logits.dtype)
    for i in range(q_len):
        for j in range(k_len):
            p[i, j] = sum(torch.sigmoid(logits[i, t]) for t in range(j, k_len))
    return p


def test_all_gates_open_gives_relative_positions_plus_one():
    """sigma(+inf) = 1 on every visible key: p_ij = i - j + 1, and 0 for future keys."""
    n = 7
    p = pl.cope_positions(causal_logits(torch.full((n, n), INF)))
    i, j = torch.arange(n)[:, None], torch.arange(n)
    torch.testing.assert_close(p, torch.where(j <= i, i - j + 1, 0).float())


def test_gates_on_separators_count_sentences():
    """Tokens w w . w . w w (separators at 2 and 4); gates open only on separators: from the last
    query, keys 0-2 are two sentences back, 3-4 one, 5-6 in the current sentence (0)."""
    is_sep = torch.tensor([0, 0, 1, 0, 1, 0, 0], dtype=torch.bool)
    logits = torch.where(is_sep, INF, -INF).expand(7, 7)
    p = pl.cope_positions(causal_logits(logits))
    assert p[6].tolist() == [2, 2, 2, 1, 1, 0, 0]
    assert p[4].tolist() == [2, 2, 2, 1, 1, 0, 0]  # a separator counts itself
    assert p[3].tolist() == [1, 1, 1, 0, 0, 0, 0]


def test_positions_equal_the_loop_definition():
    g = torch.Generator().manual_seed(0)
    logits = causal_logits(torch.randn(6, 6, generator=g, dtype=torch.float64))
    torch.testing.assert_close(pl.cope_positions(logits), naive_positions(logits))
    # Rectangular: the last 2 queries of 6 keys (decoding), one row of the grid each.
    rows = logits[4:]
    torch.testing.assert_close(pl.cope_positions(rows), naive_positions(rows))


def logit_of(gate):
    return math.log(gate / (1 - gate)) if gate < 1 else INF


def test_fractional_positions_interpolate_between_neighbours():
    """Gates (0.5, 0.75, 1) on three keys: positions 2.25, 1.75, 1 -> weights on e[floor], e[ceil]."""
    cope = pl.CoPE(4, 3)
    with torch.no_grad():
        cope.pos_emb.copy_(torch.randn(3, 4))
    q = torch.randn(1, 3)
    logits = torch.tensor([[logit_of(0.5), logit_of(0.75), logit_of(1.0)]])
    e = lambda p: (q @ cope.pos_emb[:, p]).item()  # noqa: E731
    want = torch.tensor([[0.75 * e(2) + 0.25 * e(3), 0.25 * e(1) + 0.75 * e(2), e(1)]])
    torch.testing.assert_close(cope(q, logits), want)


def test_positions_are_clamped_at_max_positions_minus_one():
    cope = pl.CoPE(3, 4)
    with torch.no_grad():
        cope.pos_emb.copy_(torch.randn(4, 3))
    q = torch.randn(1, 4)
    out = cope(q, torch.full((1, 6), INF))  # positions 6, 5, ..., 1
    beyond = (q @ cope.pos_emb[:, 2]).item()
    torch.testing.assert_close(out[0, :5], torch.full((5,), beyond))
    torch.testing.assert_close(out[0, 5], (q @ cope.pos_emb[:, 1])[0])


def test_integer_positions_pick_one_vector_and_match_a_loop():
    """Heads and batch broadcast; each logit is q_i . e[p_ij] with p_ij from the loop definition."""
    g = torch.Generator().manual_seed(1)
    cope = pl.CoPE(8, 5)
    with torch.no_grad():
        cope.pos_emb.copy_(torch.randn(5, 8, generator=g))
    q = torch.randn(2, 3, 6, 5, generator=g)
    logits = causal_logits(torch.randn(2, 3, 6, 6, generator=g))
    out = cope(q, logits)
    b, h = 1, 2
    p = naive_positions(logits[b, h])
    for i in range(6):
        for j in range(i + 1):
            lo, hi = int(p[i, j].floor()), int(p[i, j].ceil())
            w = p[i, j] - lo
            want = (1 - w) * q[b, h, i] @ cope.pos_emb[:, lo] + w * q[b, h, i] @ cope.pos_emb[:, hi]
            torch.testing.assert_close(out[b, h, i, j], want)


def test_pos_emb_starts_at_zero_and_learns():
    cope = pl.CoPE(5, 4)
    assert cope.pos_emb.shape == (4, 5) and not cope.pos_emb.any()
    q = torch.randn(2, 6, 4)
    raw = torch.randn(2, 6, 6, requires_grad=True)
    (cope(q, causal_logits(raw)) * torch.randn(2, 6, 6)).sum().backward()  # a zero table still gets a gradient
    assert cope.pos_emb.grad is not None and cope.pos_emb.grad.abs().sum() > 0
    with torch.no_grad():
        cope.pos_emb.normal_()
    cope(q, causal_logits(raw)).sum().backward()
    assert raw.grad.abs().sum() > 0  # the gates learn through the interpolation weights


# ---------------------------------------------------------------- in the decoder

def cope_model(seed=0, random_tables=True):
    torch.manual_seed(seed)
    m = TinyDecoder(vocab_size=11, positional="cope", d_model=16, num_heads=2, d_ff=32, max_len=12).eval()
    if random_tables:
        with torch.no_grad():
            for cope in m.positional.per_layer:
                cope.pos_emb.normal_()
    return m


def test_registry_entry_builds_one_table_per_layer():
    m = cope_model(random_tables=False)
    tables = m.positional.per_layer
    assert m.positional.contextual and len(tables) == 2 and all(isinstance(t, pl.CoPE) for t in tables)
    assert tables[0].pos_emb.shape == (8, 13)  # head_dim, max_len + 1 (counts run 0 .. T)
    assert {n for n, _ in m.named_parameters() if "pos_emb" in n} == {"positional.per_layer.0.pos_emb",
                                                                     "positional.per_layer.1.pos_emb"}


def test_zero_tables_give_the_nope_model_through_the_explicit_attention():
    """With e = 0 CoPE adds nothing: the explicit attention path equals NoPE's scaled_dot_product_attention."""
    cope = cope_model(random_tables=False)
    torch.manual_seed(0)
    nope = TinyDecoder(vocab_size=11, positional="none", d_model=16, num_heads=2, d_ff=32, max_len=12).eval()
    x = torch.randint(0, 11, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(cope(x), nope(x), rtol=1e-5, atol=1e-5)
        assert not torch.allclose(cope_model()(x), nope(x), atol=1e-3)  # trained tables change the logits


def test_cope_layer_equals_its_definition():
    """Block 0's attention: softmax(qk/sqrt(d) + mask + CoPE(q, that)) v, written out here."""
    m = cope_model()
    attn = m.blocks[0].attn
    x = torch.randn(2, 9, 16)
    q, k, v = attn.heads(x)
    logits = causal_logits(q @ k.transpose(-2, -1) / math.sqrt(8))
    y = (logits + m.positional.per_layer[0](q, logits)).softmax(-1) @ v
    want = attn.out(y.transpose(1, 2).reshape(2, 9, 16))
    with torch.no_grad():
        got = attn(x, contextual=lambda q, lg: m.positional.logits(q, lg, layer=0))
    torch.testing.assert_close(got, want.detach())


@pytest.mark.parametrize("splits", [(1,) * 10, (4, 1, 3, 2)], ids=["token-by-token", "prefill-then-chunks"])
def test_decoding_with_the_cache_equals_the_full_forward_with_trained_tables(splits):
    """Query i's positions need only its own logits against keys 0..i, all in the cache."""
    m = cope_model()
    x = torch.randint(0, 11, (2, 10))
    cache, out, start = KVCache(), [], 0
    with torch.no_grad():
        full = m(x)
        for n in splits:
            out.append(m(x[:, start:start + n], cache=cache))
            start += n
    torch.testing.assert_close(torch.cat(out, 1), full, rtol=1e-5, atol=1e-5)


def test_training_step_reaches_the_tables_and_runs_beyond_max_len():
    m = cope_model(random_tables=False).train()
    x = torch.randint(0, 11, (4, 12))
    loss = torch.nn.functional.cross_entropy(m(x[:, :-1]).flatten(0, 1), x[:, 1:].flatten())
    loss.backward()
    assert all(c.pos_emb.grad.abs().sum() > 0 for c in m.positional.per_layer)
    with torch.no_grad():
        assert m.eval()(torch.randint(0, 11, (1, 40))).shape == (1, 40, 11)  # counts past 12 are clamped


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("args,match", [
    ((0, 4), "max_positions must be an integer >= 1, got 0"),
    ((2.5, 4), "max_positions must be an integer >= 1, got 2.5"),
    ((4, 0), "head_dim must be an integer >= 1, got 0"),
])
def test_bad_construction_raises_value_error(args, match):
    with pytest.raises(ValueError, match=match):
        pl.CoPE(*args)


@pytest.mark.parametrize("q,logits,match", [
    (torch.randn(3, 5), torch.zeros(3, 3), r"query.shape\[-1\] must be 4, got 5"),
    (torch.randn(4), torch.zeros(3, 3), r"query must be a tensor of shape \(..., q_len, head_dim\)"),
    (torch.randn(3, 4), torch.zeros(2, 3), r"attn_logits must have shape \(..., q_len, k_len\) = \(3,\)"),
    (torch.randn(3, 4), torch.zeros(3, 3, dtype=torch.long), "attn_logits must be a floating tensor"),
    (torch.randn(3, 4), torch.zeros(3), "attn_logits must be a floating tensor"),
])
def test_bad_forward_input_raises_value_error(q, logits, match):
    with pytest.raises(ValueError, match=match):
        pl.CoPE(6, 4)(q, logits)
