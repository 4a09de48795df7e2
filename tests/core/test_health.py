from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_healthz_names_what_is_down_with_503_when_no_worker_runs() -> None:
    # No Celery worker runs in this process's test session; database and Redis are up.
    response = Client().get("/healthz")
    body = response.json()
    assert response.status_code == 503
    assert body["down"] == ["celery"]
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["redis"]["ok"] is True
