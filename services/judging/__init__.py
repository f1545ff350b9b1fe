"""Judging an answer: is each claim supported by the contexts, does it answer what was asked, P(supported)."""
