"""Checkers for notebooks/04_*.ipynb."""
from __future__ import annotations

__all__: list[str] = []
