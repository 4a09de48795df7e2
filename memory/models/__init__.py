"""The memory app's models: memories, episodes, conversations and consolidation's change log
(memories), and what runs teach (learning: quality, patterns, investigations), re-exported here."""

from memory.models.learning import (
    HumanMark,
    Investigation,
    InvestigationOutcome,
    LearnedPattern,
    PatternOutcome,
    PatternUse,
    RunQuality,
)
from memory.models.memories import (
    DIMENSIONS,
    TEXT_SEARCH_CONFIG,
    ContextType,
    Conversation,
    Episode,
    EpisodeOutcome,
    Memory,
    MemoryChange,
    MemoryChangeAction,
    MemoryType,
)

__all__ = [
    "DIMENSIONS",
    "TEXT_SEARCH_CONFIG",
    "ContextType",
    "Conversation",
    "Episode",
    "EpisodeOutcome",
    "HumanMark",
    "Investigation",
    "InvestigationOutcome",
    "LearnedPattern",
    "Memory",
    "MemoryChange",
    "MemoryChangeAction",
    "MemoryType",
    "PatternOutcome",
    "PatternUse",
    "RunQuality",
]
