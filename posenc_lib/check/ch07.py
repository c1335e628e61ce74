"""Checkers for notebooks/07_*.ipynb."""
from __future__ import annotations

__all__: list[str] = []
