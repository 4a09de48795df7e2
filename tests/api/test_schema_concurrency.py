"""The OpenAPI schema asked for by several people at once in a process that has not generated it
yet (a web server just started, two people opening the API docs): every one gets it. The soak
(bench/soak) saw /api/schema/ answer 500: drf-spectacular resolves its extensions' classes on a
first generation, in a way two threads at once can break (tfranzel/drf-spectacular#1122)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

# A fresh interpreter: the first generation is what breaks, and this test process has had its own.
SCRIPT = """
import threading
import django
django.setup()
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory
from django.urls import resolve
view = resolve("/api/schema/").func
barrier = threading.Barrier(THREADS)
answers = []
def fetch():
    request = RequestFactory().get("/api/schema/", {"format": "json"})
    request.user = AnonymousUser()
    barrier.wait()
    try:
        answers.append(view(request).status_code)
    except Exception as exc:
        answers.append(repr(exc))
threads = [threading.Thread(target=fetch) for _ in range(THREADS)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(sorted(answers, key=str))
"""


def test_the_schema_asked_for_by_six_people_at_once_answers_all_of_them() -> None:
    threads = 6
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT.replace("THREADS", str(threads))],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == str([200] * threads), done.stdout[-2000:]
