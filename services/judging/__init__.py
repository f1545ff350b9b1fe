"""Judging an answer: is each claim supported by the contexts, does it answer what was asked, P(supported)."""

from services.judging.judge import judge_answer
from services.judging.verdict import ClaimCheck, Verdict

__all__ = ["ClaimCheck", "Verdict", "judge_answer"]
