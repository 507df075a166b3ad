"""The user's embeddings named by ``store.index.embed`` (``./embed.py:embed``): each text's letter
counts, a to z. Deterministic and local, so ours and the reference rank alike."""

from __future__ import annotations

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def embed(texts: list[str]) -> list[list[float]]:
    return [[float(t.lower().count(c)) for c in LETTERS] for t in texts]
