from __future__ import annotations

import logging
import uuid

import pytest
from celery import Celery
from django.conf import settings
from django.db import OperationalError
from django.test import Client, override_settings
from prometheus_client.parser import text_string_to_metric_families

from core.health import CheckResult, check_celery
from tests.core.failing_site import FAILING_PATH

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


def test_a_503_health_answer_is_logged_as_information_naming_what_is_down(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # As during a start-up, before the database answers (the probe's own answer, not a fault).
    down: CheckResult = {"ok": False, "error": "OperationalError: connection refused"}
    monkeypatch.setattr("core.views.check_database", lambda connection: down)
    monkeypatch.setattr("core.views.check_celery", lambda: {"ok": True})  # no worker here
    with caplog.at_level(logging.INFO, logger="django.request"):
        response = Client().get("/healthz")
    assert response.status_code == 503
    logged = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "django.request"]
    assert logged == [("INFO", "Health check answered 503: database down")]


def test_any_other_server_error_is_still_logged_as_an_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = Client(raise_request_exception=False)
    with override_settings(ROOT_URLCONF="tests.core.failing_site"):
        response = client.get(FAILING_PATH)
    assert response.status_code == 500
    errors = [r for r in caplog.records if r.name == "django.request" and r.levelname == "ERROR"]
    assert [r.getMessage() for r in errors] == [f"Internal Server Error: {FAILING_PATH}"]


def test_the_project_app_stays_the_current_celery_app() -> None:
    from celery import current_app

    from config.celery_app import app

    assert current_app.main == app.main


def _replacements() -> float:
    text = Client().get("/metrics").content.decode()
    (value,) = (
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "agentdesk_db_pool_replacements_total"
    )
    return value


class TestAPoolThatStallsOnceTheDatabaseAnswers:
    """``refused_for_outage``: a request refused for a pool timeout while a new connection goes
    through means the pool is stalled; it is replaced. (While the database is down it is kept:
    tests/operations/test_database_outage.py.)"""

    def test_is_replaced_and_the_next_request_gets_a_new_pool(
        self, django_db_setup: None, caplog: pytest.LogCaptureFixture
    ) -> None:
        from django.db import connection
        from psycopg_pool import PoolTimeout

        from core import database

        stalled = connection.pool  # type: ignore[attr-defined]
        assert stalled is not None
        replaced_before = _replacements()
        try:
            raise OperationalError("no connection") from PoolTimeout("after 5.00 sec")
        except OperationalError as exc:
            database.refused_for_outage(exc, "request")
        assert connection.pool is not stalled  # type: ignore[attr-defined]
        assert "replacing it" in caplog.text
        # A last resort that hides connections held somewhere: counted for the operator.
        assert _replacements() == replaced_before + 1

    def test_other_failures_leave_the_pool_alone(self, django_db_setup: None) -> None:
        from django.db import connection

        from core import database

        pool = connection.pool  # type: ignore[attr-defined]
        database.refused_for_outage(OperationalError("server closed the connection"), "request")
        assert connection.pool is pool  # type: ignore[attr-defined]


def test_livez_answers_200_without_the_database_for_any_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Kubernetes' liveness probe (deploy/kubernetes): a database outage must not have the pods
    # restarted, and the kubelet asks by the pod's address, which is not an allowed host.
    from django.db import connection

    def unreachable() -> None:
        raise OperationalError("the database is down")

    monkeypatch.setattr(connection, "ensure_connection", unreachable)
    response = Client(HTTP_HOST="10.42.0.7:8000").get("/livez")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_checks_only_what_is_asked_and_refuses_an_unknown_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A web pod's readiness (``?checks=database``) answers 200 with no worker anywhere: the
    whole /healthz would be 503 and take every web pod out of service."""
    monkeypatch.setattr(
        "core.views.check_celery", lambda: {"ok": False, "error": "no Celery worker answered"}
    )
    assert Client().get("/healthz").status_code == 503
    response = Client().get("/healthz?checks=database")
    assert response.status_code == 200
    assert set(response.json()["checks"]) == {"database"}
    both = Client().get("/healthz?checks=database,redis").json()
    assert set(both["checks"]) == {"database", "redis"}

    for wrong in ("?checks=database,disk", "?checks="):
        refused = Client().get(f"/healthz{wrong}")
        assert refused.status_code == 400
        assert refused.json()["code"] == "unknown_check"
        assert "database, redis, celery" in refused.json()["message"]
