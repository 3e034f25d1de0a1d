"""The FX-graph cache (filled in below)."""
from __future__ import annotations


def lookup(gm, args):
    return None


def save(gm, args, art):
    pass


def load(art, gm):
    return art
