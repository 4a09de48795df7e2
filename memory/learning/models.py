"""The learning models, defined in :mod:`memory.models.learning` (Django loads an app's models
from its ``models`` package, which imports nothing of ``memory.learning``); re-exported for the
learning modules."""

from memory.models.learning import (
    HumanMark,
    Investigation,
    InvestigationOutcome,
    LearnedPattern,
    PatternOutcome,
    PatternUse,
    RunQuality,
)

__all__ = [
    "HumanMark",
    "Investigation",
    "InvestigationOutcome",
    "LearnedPattern",
    "PatternOutcome",
    "PatternUse",
    "RunQuality",
]
