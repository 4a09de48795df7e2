"""Test settings: development's (the devkit app, the embedded services), a private database, fast
password hashing."""

import os

from config.env import env
from config.settings.dev import *  # noqa: F403
from config.settings.dev import BASE_DIR, CACHES, DATABASES, REST_FRAMEWORK

# One database per test run, and per pytest-xdist worker of a run, so that parallel runs on one
# machine do not drop each other's. Subprocesses (a Celery worker, `manage.py up`) inherit the
# name through the environment. An xdist worker inherits its controller's as well: the name
# records which worker it belongs to ("" outside xdist), and a worker that finds another's takes
# its own, with its own metrics directory (the controller's is set in the environment too).
TEST_DATABASE_PREFIX = "agentdesk_test_"
_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if os.environ.get("AGENTDESK_TEST_DB_WORKER", "") != _XDIST_WORKER:
    _inherited = os.environ.pop("AGENTDESK_TEST_DB", "")
    if _inherited and os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").endswith(_inherited):
        del os.environ["PROMETHEUS_MULTIPROC_DIR"]
    os.environ["AGENTDESK_TEST_DB_WORKER"] = _XDIST_WORKER
os.environ.setdefault("AGENTDESK_TEST_DB", f"{TEST_DATABASE_PREFIX}{os.getpid()}")
for _alias in ("default", "owner"):
    DATABASES[_alias]["NAME"] = os.environ["AGENTDESK_TEST_DB"]
    DATABASES[_alias]["CONN_MAX_AGE"] = 0

# Metrics samples of this run's processes (its workers inherit the variable), apart from those of
# a platform or another test run on the same checkout; removed when the run ends (conftest).
PROMETHEUS_MULTIPROC_DIR = env.str(
    "PROMETHEUS_MULTIPROC_DIR",
    default=str(BASE_DIR / ".data" / "prometheus-test" / os.environ["AGENTDESK_TEST_DB"]),
)
# Queues and control broadcasts (ping, ...) of this run live under their own Redis keys: a
# worker of another run (or of `make run`) on the same Redis never takes this run's tasks (they
# go to the queues production names, config/queues.py), and this run's worker never takes theirs.
CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": f"{os.environ['AGENTDESK_TEST_DB']}:"}

# Cache keys (API throttle counters) of this run apart from other runs' on the same Redis; rates
# no test of something else reaches (the throttling tests set low ones).
CACHES["default"]["KEY_PREFIX"] = os.environ["AGENTDESK_TEST_DB"]
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"].update(
    {
        "api_burst": "100000/min",
        "api_sustained": "1000000/hour",
        "api_bad_credentials": env.str("AGENTDESK_API_BAD_CREDENTIALS_RATE", default="100000/min"),
    }
)

# Many tests log in, some with a wrong password on purpose: no lockout unless a test asks for one
# (override_settings, or AGENTDESK_LOGIN_FAILURE_LIMIT for the servers it starts).
AXES_FAILURE_LIMIT = env.int("AGENTDESK_LOGIN_FAILURE_LIMIT", default=100_000)

MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
WHITENOISE_AUTOREFRESH = True
# Worker and server processes started by tests load these settings too: no per-query logging.
DEBUG = False
# The fake provider server listens on loopback: agencies' endpoints may point at it.
AGENTDESK_LLM_PRIVATE_NETWORKS = ["127.0.0.0/8"]
# Outbound webhooks' receivers are test servers on loopback, and their retries come soon.
AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS = ["127.0.0.0/8"]
AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE = env.list(
    "AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE", cast=float, default=[0.5, 1, 1, 1]
)
AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS = env.float(
    "AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS", default=3.0
)
# The OpenID Connect provider the single sign-on tests run (tests/sso/provider/) too.
AGENTDESK_SSO_PRIVATE_NETWORKS = ["127.0.0.0/8"]
