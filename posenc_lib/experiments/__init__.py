"""Experiments that train small models; each module runs as ``python -m posenc_lib.experiments.<name>``.

extrapolation: train short (64 tokens), test long (up to 8x), for every positional
method of ``posenc_lib.model.TinyDecoder``; writes results/extrapolation.json and
images/extrapolation.png. Taught in: notebooks/07_beyond.ipynb
"""
