"""Benchmarks for posenc_lib: ratios measured side by side in one process (``make bench``)."""
