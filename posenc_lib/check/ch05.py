"""Checkers for notebooks/05_*.ipynb."""
from __future__ import annotations

__all__: list[str] = []
