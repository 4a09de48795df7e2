"""Per-agency API keys: the model, the writers and the lookup used by API authentication."""
