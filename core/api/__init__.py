"""REST API building blocks shared by every app (authentication, tenancy, errors, schema), and
the core app's own endpoints (events, API keys)."""
