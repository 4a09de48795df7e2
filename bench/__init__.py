"""Benchmarks (see bench/README.md). Importing the package sets Django up on a private
benchmark database, before any module of the project is imported: run them as
``python -m bench.<name>``."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("AGENTDESK_TEST_DB", f"agentdesk_bench_{os.getpid()}")
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings.test"
os.environ.setdefault("LOG_LEVEL", "WARNING")
if "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
    # The metrics samples of this benchmark's processes (its workers inherit it), removed after.
    import atexit
    import shutil
    import tempfile

    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="agentdesk-bench-metrics-")
    atexit.register(shutil.rmtree, os.environ["PROMETHEUS_MULTIPROC_DIR"], ignore_errors=True)

import django  # noqa: E402

django.setup()
