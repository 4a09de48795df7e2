"""Replay (dry) of a recorded run against the current tools, and retry from a step."""
