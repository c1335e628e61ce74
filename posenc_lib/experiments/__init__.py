"""Experiments that train small models; each module runs as ``python -m posenc_lib.experiments.<name>``.

extrapolation: train short (64 tokens), test long (up to 8x), for every positional
method of ``posenc_lib.model.TinyDecoder``; writes results/extrapolation.json and
images/extrapolation.png. Taught in: notebooks/07_beyond.ipynb
cope_counting: CoPE, RoPE and NoPE on flip-flop (counting writes, not tokens), trained at
64 tokens and tested up to 512, three seeds each; writes results/cope_counting.json and
images/cope_counting.png. Taught in: notebooks/09_beyond_1d.ipynb
"""

from posenc_lib.experiments._training import ordering_by_chance, separation

__all__ = ["ordering_by_chance", "separation"]
