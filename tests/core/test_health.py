from __future__ import annotations

import uuid

import pytest
from celery import Celery
from django.conf import settings
from django.test import Client

from core.health import check_celery

pytestmark = pytest.mark.django_db


def test_healthz_reports_database_and_redis_up() -> None:
    body = Client().get("/healthz").json()
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is True
    assert set(body["checks"]) == {"database", "redis", "celery"}


def test_healthz_is_503_naming_celery_when_no_worker_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same Redis, but a key namespace no worker listens on: a real ping that nobody answers.
    lonely = Celery(
        "nobody-home",
        broker=settings.CELERY_BROKER_URL,
        broker_transport_options={"global_keyprefix": f"lonely-{uuid.uuid4().hex}:"},
        # Not the current app: shared tasks (the runtime's) would otherwise publish through it
        # for the rest of the session, where no worker listens.
        set_as_current=False,
    )
    result = check_celery(lonely)
    assert result["ok"] is False
    assert "no Celery worker" in result["error"]
    monkeypatch.setattr("core.views.check_celery", lambda: check_celery(lonely))
    response = Client().get("/healthz")
    assert response.status_code == 503
    assert response.json()["down"] == ["celery"]


def test_the_project_app_stays_the_current_celery_app() -> None:
    from celery import current_app

    from config.celery_app import app

    assert current_app.main == app.main
