"""The settings `manage.py up` gives its web server (config.settings.dev, DEBUG as the
environment says) with a URLconf that has one failing page (tests/core/failing_site.py)."""

from config.settings.dev import *  # noqa: F403

ROOT_URLCONF = "tests.core.failing_site"
