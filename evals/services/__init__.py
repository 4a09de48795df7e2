"""The evaluations' writers: datasets and their versions (datasets.py), a case saved from a run
(cases.py), experiments and their scores (experiments.py)."""
