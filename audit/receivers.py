"""Signal receivers: the audited models (audit.registry) and logins."""
