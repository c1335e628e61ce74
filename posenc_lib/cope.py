"""Contextual Position Encoding (CoPE, Golovneva et al. 2024): positions counted by gates.

Query i gives every key t a gate g_it = sigmoid(logit_it) in (0, 1), from its own attention
logit. The position of key j seen from query i is the number of gates that fire between them:
    p_ij = sum_{t = j .. i} g_it            (a reverse cumulative sum over the keys)
With every gate open (g = 1) this is i - j + 1, the distance i - j plus one (not the offset j - i,
the course's relative position, which is negative for past keys); with gates that fire only
on separator tokens it counts sentences. p_ij is fractional, so the positional logit
q_i . e[p_ij] interpolates linearly between the learned vectors e[floor(p)] and e[ceil(p)];
positions past max_positions - 1 are clamped there. The logit is added to the attention logit.
As in the reference code (facebookresearch/RAM, projects/cope): the gates are the sigmoid of the
scaled logits q.k / sqrt(d) (masked keys, -inf, count 0); e starts at zero; one table per layer,
shared by its heads. The reference adds q.e[p] before dividing by sqrt(d) unless run with
``--cope-nodiv``; here it is added after (the nodiv form), which only rescales e by sqrt(d).
Names: q_len = queries (index i), k_len = keys (index j), d = head dimension.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from . import _validate as v


def cope_positions(attn_logits: Tensor) -> Tensor:
    """p_ij = sum_{t=j..i} sigmoid(attn_logits[..., i, t]): the gates summed from key j to the last key.

    attn_logits: (..., q_len, k_len) floating, -inf where a key is masked (its gate is 0)
    returns:     (..., q_len, k_len), same dtype; under a causal mask 0 for future keys
    Taught in: notebooks/09_beyond_1d.ipynb
    """
    if not isinstance(attn_logits, Tensor) or attn_logits.dim() < 2 or not attn_logits.is_floating_point():
        raise ValueError(f"attn_logits must be a floating tensor of shape (..., q_len, k_len), "
                         f"got {getattr(attn_logits, 'shape', type(attn_logits))}")
    gates = attn_logits.sigmoid()
    return gates.flip(-1).cumsum(-1).flip(-1)


class CoPE(nn.Module):
    """CoPE's positional logits: (query, attn_logits) -> q_i . e[p_ij], interpolated.

    pos_emb:  parameter (head_dim, max_positions), the vectors e[0], ..., e[max_positions - 1]
              as columns; zeros at the start, as in the reference code
    query:    (..., q_len, head_dim)
    attn_logits: (..., q_len, k_len) the masked attention logits that give the gates
    returns:  (..., q_len, k_len) logits to add to attn_logits
    Taught in: notebooks/09_beyond_1d.ipynb
    """

    def __init__(self, max_positions: int, head_dim: int):
        super().__init__()
        self.max_positions = v.int_at_least("max_positions", max_positions, 1)
        self.head_dim = v.int_at_least("head_dim", head_dim, 1)
        self.pos_emb = nn.Parameter(torch.zeros(head_dim, max_positions))

    def forward(self, query: Tensor, attn_logits: Tensor) -> Tensor:
        if not isinstance(query, Tensor) or query.dim() < 2:
            raise ValueError(f"query must be a tensor of shape (..., q_len, head_dim), "
                             f"got {getattr(query, 'shape', type(query))}")
        v.last_dim("query", query, self.head_dim)
        positions = cope_positions(attn_logits)
        if attn_logits.shape[:-1] != query.shape[:-1]:
            raise ValueError(f"attn_logits must have shape (..., q_len, k_len) = {tuple(query.shape[:-1])} + "
                             f"(k_len,) to match query {tuple(query.shape)}, got {tuple(attn_logits.shape)}")
        positions = positions.clamp(max=self.max_positions - 1)
        per_position = query @ self.pos_emb.to(query.dtype)  # (..., q_len, max_positions): q_i . e[p]
        floor = positions.detach().floor()
        below = per_position.gather(-1, floor.long())
        above = per_position.gather(-1, positions.detach().ceil().long())
        w = positions - floor  # differentiable: the gradient reaches the gates through the weights
        return below + w * (above - below)
