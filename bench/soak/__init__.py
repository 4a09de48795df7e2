"""The soak: the platform under a mixed load from Locust for minutes on end (``python -m
bench.soak``; bench/README.md has the figures and how they are taken)."""
