"""Single sign-on: OpenID Connect login per agency (README "Single sign-on", decision 0012)."""
