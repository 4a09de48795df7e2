"""A real OpenID Connect provider for the single sign-on tests: django-oauth-toolkit with OIDC
on, an RS256 key made at its start, its own sqlite database, on 127.0.0.1 (serve.py)."""
