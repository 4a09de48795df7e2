"""What only development and tests use: the scripted demo / fake model server
(:mod:`devkit.fake_server`), the demo agency's seed (:mod:`devkit.demo`), the embedded PostgreSQL
and Redis (:mod:`devkit.embedded`) and the ``manage.py up`` and ``manage.py embedded`` commands.

Installed by ``config.settings.dev`` (the default of ``manage.py``, ``config.asgi`` and
``config.celery_app``) and ``config.settings.test`` only: production settings load none of it, and
no product package imports it (the ``devkit`` contract in pyproject.toml).
"""
