"""Checkers for notebooks/03_*.ipynb."""
from __future__ import annotations

__all__: list[str] = []
