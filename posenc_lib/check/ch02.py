"""Checkers for notebooks/02_*.ipynb."""
from __future__ import annotations

__all__: list[str] = []
