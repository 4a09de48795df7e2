"""Settings shared by every environment, with development defaults.

Every variable is documented in `.env.example`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import django_stubs_ext
import environ
from django.core.exceptions import ImproperlyConfigured
from django.templatetags.static import static
from psycopg_pool import ConnectionPool

from config import queues
from config.db_pool import check_unless_quiet
from config.env import env, service_urls

# Generic admin/queryset classes (ModelAdmin[Agency]) at runtime, as the type stubs describe them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env_file = BASE_DIR / ".env"
if env_file.exists():
    environ.Env.read_env(str(env_file))

# Off unless set: Django's debug pages (settings, every URL pattern, a traceback's variables) are
# for a developer who asks for them; everyone else gets templates/404.html and 500.html.
# `manage.py up` turns it off for a web server other machines reach.
DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Development-only default; production.py refuses to start without DJANGO_SECRET_KEY.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="dev-insecure-0f3c1e8a-agentdesk-change-me")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])
CSRF_FAILURE_VIEW = "core.error_pages.csrf_failure"  # the admin's look; Django's with DEBUG

INSTALLED_APPS = [
    # core first: its `migrate` command overrides Django's to run as the owner role.
    "core",
    "agents",
    "tools",
    "memory",
    "approvals",
    "usage",
    "crm",
    "live",
    "ops",
    "flow",  # flow analysis: decision points, loops, stuck runs, expected workflows
    "understanding",  # understand a request before acting, ask when unsure (README)
    "teams",  # delegate_to_agent: agents handing sub-tasks to each other
    "members",  # invitations (the membership itself is core's)
    "webhooks",  # inbound signed webhooks that start agent runs
    "evals",  # test cases, datasets and experiments (README "Evaluations")
    "datasets",  # agencies' data files and the guarded SQL tools over them (README "Datasets")
    "sso",  # OpenID Connect sign-in per agency (README "Single sign-on")
    "audit",  # who did what: the hash-chained audit log (README "Audit log")
    "protocols",  # agents as MCP tools and A2A agents (README "Agents as MCP tools")
    "channels",
    # The admin theme; before django.contrib.admin so that its templates win.
    "unfold",
    "unfold.contrib.filters",
    "unfold.contrib.forms",
    # The admin without autodiscover at start-up: the apps' admin modules (and unfold's) load
    # with the URLs (config/urls.py; a web process at start, config/asgi.py), never in a worker
    # or a management command that has no page to show (0.8 s of every such process's start).
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.postgres",  # ArrayField, GIN indexes
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",  # per-user API tokens (a platform table, not agency-owned)
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / Redoc assets served locally, no CDN
    "config.apps.CeleryBeatConfig",  # django_celery_beat, with its own id type
    "axes",  # failed logins counted per account and per address (README "Login throttling")
]

MIDDLEWARE = [
    # Outermost: whatever answers under /api/ with an error (Django's 500 or debug page, a 404),
    # the client gets the API's JSON error shape (core/middleware.py).
    "core.middleware.ApiErrorMiddleware",
    # /healthz first: it reports on the database, so it must not need it (core/middleware.py).
    "core.middleware.HealthCheckMiddleware",
    # A NUL in the URL is a 400 before anything queries with it (PostgreSQL refuses NUL).
    "core.middleware.RejectNulMiddleware",
    # /metrics likewise: counters need no database (ops/middleware.py).
    "ops.middleware.MetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: the request is where audit entries read their actor (audit/).
    "audit.context.AuditContextMiddleware",
    # After authentication: opens the request's transaction with the user's agency set.
    "core.middleware.TenantMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: a login refused for too many failures becomes its lockout page.
    "axes.middleware.AxesMiddleware",
]

# The lockout check first (it refuses a locked-out account or address before any password is
# checked), then the users' own passwords.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Refuses the password of a member of an agency that signs in through its provider only.
    "sso.backends.PasswordGate",
    "django.contrib.auth.backends.ModelBackend",
    # An agency's OpenID Connect provider (sso/): only the SSO callback passes its credentials.
    "sso.backends.AgencyOIDCBackend",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
AUTH_USER_MODEL = "core.User"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


def _database(url: str, *, pooled: bool = False) -> dict[str, Any]:
    config: dict[str, Any] = environ.Env.db_url_config(url)
    # A unix-socket directory arrives percent-encoded in the URL's host part.
    config["HOST"] = unquote(config.get("HOST") or "")
    options = config.setdefault("OPTIONS", {})
    if pooled and env.bool("DATABASE_POOL", default=True):
        # A pool per process: a worker keeps hundreds of runs in flight, each holding a
        # connection only while it reads or commits, never while the model answers.
        options["pool"] = {
            "min_size": env.int("DATABASE_POOL_MIN_SIZE", default=2),
            "max_size": env.int("DATABASE_POOL_MAX_SIZE", default=32),
            "timeout": env.float("DATABASE_POOL_TIMEOUT", default=30.0),
            # After an outage the pool retries a lost connection with a doubling delay (1, 2,
            # 4, 8, 16 s...) until this; past it, it gives up and the next checkout connects at
            # once. A short limit keeps a restarted server from waiting on a 16 s backoff.
            "reconnect_timeout": env.float("DATABASE_POOL_RECONNECT_TIMEOUT", default=10.0),
        }
        if env.bool("DATABASE_POOL_CHECK", default=False):
            # Each connection tested when handed out (one round trip): what a web request
            # wants after a database restart.
            options["pool"]["check"] = ConnectionPool.check_connection
        else:
            # A worker's steps skip the round trip: a connection is tested only when its
            # socket shows the server closed it (config/db_pool.py).
            options["pool"]["check"] = check_unless_quiet
        config["CONN_MAX_AGE"] = 0  # the pool keeps connections; Django must not
    else:
        config["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
        config["CONN_HEALTH_CHECKS"] = True
    # Server-side binding lets psycopg prepare the statements the runtime repeats every step
    # (parse and plan once per connection); its unnamed statements are safe behind any pooler.
    options["server_side_binding"] = env.bool("DATABASE_SERVER_SIDE_BINDING", default=True)
    # Behind a pooler in transaction mode (README "PgBouncer") consecutive transactions of one
    # connection may run on different server sessions: nothing may outlive a transaction. Named
    # prepared statements would (unless PgBouncer >= 1.21 tracks them: max_prepared_statements,
    # then set DATABASE_PREPARE_THRESHOLD), and so would Django's WITH HOLD cursors of
    # .iterator() outside a transaction. Tenant settings are transaction-local everywhere.
    pooler = env.str("DATABASE_POOLER", default=SERVICES.database_pooler)
    if pooler not in ("", "none", "pgbouncer"):
        raise ImproperlyConfigured(f"DATABASE_POOLER must be 'pgbouncer' or 'none', not {pooler!r}")
    behind_pgbouncer = pooler == "pgbouncer"
    config["DISABLE_SERVER_SIDE_CURSORS"] = behind_pgbouncer
    # Prepared after this many executions on a connection (Django's default, None, never does).
    prepare = env.int("DATABASE_PREPARE_THRESHOLD", default=-1 if behind_pgbouncer else 5)
    prepared = prepare >= 0 and options["server_side_binding"]
    options["prepare_threshold"] = prepare if prepared else None
    return config


SERVICES = service_urls()

DATABASES = {
    # The runtime role: not superuser, not BYPASSRLS, not the owner of any table.
    "default": _database(SERVICES.database, pooled=True),
    # The owner role: runs migrations (`manage.py migrate` uses it by default).
    "owner": _database(SERVICES.database_owner),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = SERVICES.redis

# The cache (Django's Redis backend on REDIS_URL): API throttle counters (core/api/throttling.py).
# Short socket timeouts: a Redis outage costs a request at most this, and throttling then lets
# requests through (fails open) rather than failing them.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("AGENTDESK_CACHE_KEY_PREFIX", default="agentdesk"),
        "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env.str("DJANGO_TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / ".data" / "static"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve app static files straight from their folders without `collectstatic` in development.
WHITENOISE_USE_FINDERS = True
# Development: a changed static file is served at the next request (production.py turns it off
# and serves what collectstatic gathered).
WHITENOISE_AUTOREFRESH = True

# --- Login throttling (django-axes; README "Login throttling") -----------------------------------
# Failed logins (the admin's login page, an invitation's "log in and join") are counted per
# username and per client address (core/client.py); once either has this many failures, each
# less than the cool-off apart, that account or address cannot log in (the right password
# included) until the cool-off has passed since the last failure, or an admin unlocks it.
AXES_FAILURE_LIMIT = env.int("AGENTDESK_LOGIN_FAILURE_LIMIT", default=10)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("AGENTDESK_LOGIN_LOCKOUT_MINUTES", default=15.0))
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_CLIENT_IP_CALLABLE = "core.client.client_address"
# The lockout page in the admin's look, 429 with Retry-After (core/login_throttle.py).
AXES_LOCKOUT_CALLABLE = "core.login_throttle.lockout_response"
# A refused try during the lockout does not restart it: the person can come back at the time the
# page names. A success does not clear the failures either (axes would clear every failure from
# that address: one valid login would reset an attacker's count against another account).
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_RESET_ON_SUCCESS = False
# No row per successful login (nothing prunes them); the attempts' admin is core's (unfold).
AXES_DISABLE_ACCESS_LOG = True
AXES_ENABLE_ADMIN = False
AXES_VERBOSE = False  # no version line from every process at start
if AXES_FAILURE_LIMIT < 1:
    raise ImproperlyConfigured("AGENTDESK_LOGIN_FAILURE_LIMIT must be at least 1.")

LOGIN_URL = "admin:login"
# After a login with no ?next= (unfold's login form drops the admin's hidden "next" field): the
# staff home, not Django's /accounts/profile/ (a 404 here).
LOGIN_REDIRECT_URL = "admin:index"

# --- Admin theme (django-unfold) ------------------------------------------------------------------
UNFOLD: dict[str, Any] = {
    # The admin index is the staff home (live/views.py); the site's root ("View site") leads to it.
    "DASHBOARD_CALLBACK": "live.views.dashboard_callback",
    # Everything the theme loads (Inter, Material Symbols, Alpine, htmx, Chart.js) is one of its
    # static files: no font or script comes from the internet, the admin works offline.
    "SITE_TITLE": "AgentDesk",
    "SITE_HEADER": "AgentDesk",
    "SITE_SYMBOL": "smart_toy",
    "SITE_FAVICONS": [
        {
            "rel": "icon",
            "type": "image/svg+xml",
            "href": lambda request: static("core/favicon.svg"),  # also /favicon.ico (core.views)
        }
    ],
    "SITE_SUBHEADER": "core.admin_navigation.site_subheader",  # the agency and the role
    # Every admin page: live notifications (what waits for a person) and the Inbox badge.
    "SCRIPTS": [lambda request: static("live/notifications.js")],
    "STYLES": [lambda request: static("live/notifications.css")],
    "SIDEBAR": {
        "show_search": True,
        "show_all_applications": False,
        "navigation": "core.admin_navigation.sidebar_navigation",
    },
}

# --- Mail (Django 6.1 mailers) -----------------------------------------------------------------
# Development logs each e-mail as one INFO line (core.mail, nothing sent); production names an
# SMTP (or other) backend and its options, e.g.
# AGENTDESK_MAIL_OPTIONS='{"host": "smtp.example.com", "port": 587, "use_tls": true}'.
MAILERS = {
    "default": {
        "BACKEND": env.str("AGENTDESK_MAIL_BACKEND", default="core.mail.LogEmailBackend"),
        "OPTIONS": env.json("AGENTDESK_MAIL_OPTIONS", default={}),
    }
}
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="AgentDesk <agents@agentdesk.localhost>")

# --- Celery -----------------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
if CELERY_BROKER_URL.startswith("redis://"):
    # kombu's Redis transport, whose channels close cleanly when Redis is gone: kombu's own
    # ended the worker on a Redis crash or restart (config/broker_transport.py).
    CELERY_BROKER_TRANSPORT = "config.broker_transport:Transport"
CELERY_TASK_IGNORE_RESULT = True  # Results live in PostgreSQL; Celery only delivers work.
# One queue per kind of work, routed by task name (config/queues.py, README "Queues"): a worker
# without -Q consumes every queue declared here; an unrouted task goes to `runs`.
CELERY_TASK_QUEUES = queues.CELERY_QUEUES
CELERY_TASK_DEFAULT_QUEUE = queues.DEFAULT
CELERY_TASK_ROUTES = ("config.queues.route",)
CELERY_TASK_ACKS_LATE = True  # A worker that dies mid-task leaves the message for another one.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Model calls are I/O-bound: a worker runs executions on threads, many at once ("The agent
# runtime" in README). A plain `celery -A config worker` uses these; --pool / --concurrency win.
CELERY_WORKER_POOL = "threads"
CELERY_WORKER_CONCURRENCY = env.int("CELERY_WORKER_CONCURRENCY", default=64)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker whose broker went away waits for it as long as it takes, reconnecting every 2 s
# (config/celery_consumer.py), and keeps running the runs it holds (they need only PostgreSQL):
# it does not give up after 100 attempts and exit, leaving them to a supervisor there may not be.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_WORKER_CONSUMER = "config.celery_consumer:BrokerConsumer"
# Runs in flight are not cancelled when the broker connection drops (Celery 6 will cancel them
# by default): they are durable in PostgreSQL and need no message; a duplicate is claimed once.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BEAT_SCHEDULER = "core.beat:DatabaseScheduler"
CELERY_RESULT_EXPIRES = None  # no result backend, so no `celery.backend_cleanup` entry
CELERY_TIMEZONE = TIME_ZONE
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Celery beat's fixed entries (the database scheduler copies them into its tables).
CELERY_BEAT_SCHEDULE = {
    "reap-expired-leases": {
        "task": "agents.reap_expired_leases",
        "schedule": env.float("AGENTDESK_REAPER_INTERVAL_SECONDS", default=10.0),
    },
    "deliver-stranded-emails": {
        "task": "tools.deliver_stranded_emails",
        "schedule": 60.0,
    },
    # The tools of every agency's MCP servers, discovered again (tools/mcp/).
    "refresh-mcp-tools": {
        "task": "tools.refresh_mcp_servers",
        "schedule": env.float("AGENTDESK_MCP_REFRESH_INTERVAL_SECONDS", default=3600.0),
    },
    # Idempotency-Key answers past AGENTDESK_IDEMPOTENCY_KEY_HOURS (core/api/idempotency.py).
    "purge-idempotency-records": {
        "task": "core.purge_idempotency_records",
        "schedule": 3600.0,
    },
    # What is past each agency's retention (core/retention.py), in small batches.
    "purge-runs-past-retention": {
        "task": "agents.purge_past_retention",
        "schedule": env.float("AGENTDESK_RETENTION_INTERVAL_SECONDS", default=3600.0),
    },
    "purge-events-past-retention": {
        "task": "agents.purge_events_past_retention",
        "schedule": env.float("AGENTDESK_RETENTION_INTERVAL_SECONDS", default=3600.0),
    },
    "purge-memory-changes-past-retention": {
        "task": "memory.purge_past_retention",
        "schedule": env.float("AGENTDESK_RETENTION_INTERVAL_SECONDS", default=3600.0),
    },
    "purge-webhook-deliveries-past-retention": {
        "task": "webhooks.purge_past_retention",
        "schedule": env.float("AGENTDESK_RETENTION_INTERVAL_SECONDS", default=3600.0),
    },
    "purge-datasets-past-retention": {
        "task": "datasets.purge_past_retention",
        "schedule": env.float("AGENTDESK_RETENTION_INTERVAL_SECONDS", default=3600.0),
    },
    # Audit entries past each agency's audit_retention_days (audit/retention.py).
    "purge-audit-past-retention": {
        "task": "audit.purge_past_retention",
        "schedule": env.float("AGENTDESK_RETENTION_INTERVAL_SECONDS", default=3600.0),
    },
    # Outbound webhook attempts past due whose message is lost or was too far ahead to send.
    "sweep-outbound-webhook-deliveries": {
        "task": "webhooks.sweep_due_deliveries",
        "schedule": env.float("AGENTDESK_OUTBOUND_WEBHOOK_SWEEP_SECONDS", default=60.0),
    },
    # Approvals and questions past their expires_at (agents' human_timeout_minutes) expire.
    "expire-waiting-decisions": {
        "task": "approvals.expire_waiting",
        "schedule": env.float("AGENTDESK_EXPIRY_INTERVAL_SECONDS", default=30.0),
    },
    # Runs waiting for another agent (delegate_to_agent) past their deadline time out.
    "expire-agent-waits": {
        "task": "teams.expire_waits",
        "schedule": env.float("AGENTDESK_EXPIRY_INTERVAL_SECONDS", default=30.0),
    },
    # Each agent's memories: near-duplicates merged, the unimportant, unused and old pruned.
    "consolidate-memories": {
        "task": "memory.consolidate_all",
        "schedule": env.float("AGENTDESK_MEMORY_CONSOLIDATION_INTERVAL_SECONDS", default=21600.0),
    },
    "purge-expired-conversations": {
        "task": "memory.purge_expired_conversations",
        "schedule": env.float("AGENTDESK_CONVERSATION_PURGE_INTERVAL_SECONDS", default=600.0),
    },
    # Memories and episodes still without an embedding (their task lost with a broker, or the
    # provider down when they were written), every agency: a safety net, not the main path.
    "embed-pending-memories": {
        "task": "memory.embed_pending",
        "schedule": env.float("AGENTDESK_EMBED_SWEEP_INTERVAL_SECONDS", default=300.0),
    },
    # Runs in one state longer than expected are flagged and escalated (flow/stuck.py).
    "detect-stuck-runs": {
        "task": "flow.detect_stuck_runs",
        "schedule": env.float("AGENTDESK_STUCK_CHECK_INTERVAL_SECONDS", default=60.0),
    },
    # Runs that ended get their completeness analysis against the expected workflow.
    "analyse-finished-runs": {
        "task": "flow.analyse_finished_runs",
        "schedule": env.float("AGENTDESK_COMPLETENESS_INTERVAL_SECONDS", default=60.0),
    },
}
# Where people reach this platform: the links in e-mails (approvals waiting for a decision).
AGENTDESK_BASE_URL = env.str("AGENTDESK_BASE_URL", default="http://localhost:8000")
# E-mail the agency's admins and approvers when an approval or a question waits for them
# (through EMAIL_BACKEND); in the app they are notified either way.
AGENTDESK_NOTIFY_BY_EMAIL = env.bool("AGENTDESK_NOTIFY_BY_EMAIL", default=True)
# An invitation's link works this many days after it was sent (or last re-sent), once.
AGENTDESK_INVITATION_EXPIRY_DAYS = env.int("AGENTDESK_INVITATION_EXPIRY_DAYS", default=7)
if AGENTDESK_INVITATION_EXPIRY_DAYS < 1:
    raise ImproperlyConfigured("AGENTDESK_INVITATION_EXPIRY_DAYS must be at least 1.")
# An outbox message still queued this long after it was written lost its sender (the worker died
# between the commit and the send); beat's sweeper sends it.
AGENTDESK_OUTBOX_RETRY_AFTER_SECONDS = env.int("AGENTDESK_OUTBOX_RETRY_AFTER_SECONDS", default=120)
# One still "sending" this long lost its worker mid-send (must exceed the mail backend's timeout):
# the sweeper marks it failed, outcome unknown, and never resends it.
AGENTDESK_OUTBOX_SENDING_TIMEOUT_SECONDS = env.int(
    "AGENTDESK_OUTBOX_SENDING_TIMEOUT_SECONDS", default=900
)

# --- Agent runtime ---------------------------------------------------------------------------
# The features plugged into every run (agents/runtime/plugins.py, docs/decisions/0009): dotted
# paths of RunPlugin subclasses, in order, as MIDDLEWARE; each hook runs in this order and the
# first verdict (park or finish) returned wins. Loaded once per process.
AGENTDESK_RUN_PLUGINS = env.list(
    "AGENTDESK_RUN_PLUGINS",
    default=[
        "flow.run_plugin.FlowPlugin",  # decision points, loop detection, a stuck run's cancel
        "teams.run_plugin.TeamsPlugin",  # a delegated run's tools, limits and budget share
        "memory.run_plugin.MemoryPlugin",  # recall, learned patterns, investigations
        "approvals.run_plugin.ApprovalsPlugin",  # self-correction questions
        "understanding.run_plugin.UnderstandingPlugin",  # understand first, ask when unsure
        "evals.run_plugin.EvaluationPlugin",  # an experiment's run: its version, its recording
        "evals.canary_plugin.CanaryPlugin",  # a canary's share of new runs on its candidate
    ],
)
# What may hold a tool call for a person, or refuse it, around its handler (tools/gates.py,
# docs/decisions/0009): dotted paths of ToolGate subclasses, in order; for each hook the first
# park or refusal wins. Loaded once per process.
AGENTDESK_TOOL_GATES = env.list(
    "AGENTDESK_TOOL_GATES",
    default=[
        # First: an experiment's run has its calls answered from a recording (or refused), so
        # none runs or asks a person.
        "evals.tool_gate.RecordedReplies",
        "approvals.tool_gate.ApprovalGate",  # risk-based approvals and their re-check, ask_user
    ],
)
# What may hold an agent's new version back from becoming current (agents.services.versions):
# dotted paths of classes with holds / refusal / start, in order; the first that holds an agent
# gates its saves. Loaded once per process.
AGENTDESK_VERSION_GATES = env.list(
    "AGENTDESK_VERSION_GATES",
    default=["evals.services.gate.DeployGateHold"],  # an agent's deploy gate experiment
)
# What the features do as a run ends (agents/lifecycle/listeners.py, docs/decisions/0010): dotted
# paths of callables taking a RunEnded, called in this order inside the transaction that ends the
# run (one that raises rolls the end back). Loaded once per process.
AGENTDESK_RUN_ENDED_LISTENERS = env.list(
    "AGENTDESK_RUN_ENDED_LISTENERS",
    default=[
        # First: the episode then records the calls it cancels as they end.
        "approvals.run_ended.cancel_pending_decisions",  # tool calls, approvals, questions
        "memory.run_ended.record_episode",  # the run's episode (completed after the run)
        "teams.run_ended.delegation_ended",  # resume the delegating run; cancel delegated ones
        "evals.run_ended.experiment_run_ended",  # score an experiment's run
        "evals.canary_plugin.canary_run_ended",  # evaluate a running canary (on a worker)
    ],
)
# What else happens when an event is recorded (core/events.py): dotted paths of callables taking
# the Event, called in this order in the transaction that wrote it. Loaded once per process.
AGENTDESK_EVENT_RECORDED_LISTENERS = env.list(
    "AGENTDESK_EVENT_RECORDED_LISTENERS",
    default=["webhooks.outbound.listener.event_recorded"],  # outbound webhooks' deliveries
)
# ai.budget.threshold_crossed is emitted when a day's spending crosses each of these percentages
# of its budget's limit (usage/services.py).
AGENTDESK_BUDGET_ALERT_PERCENTS = env.list(
    "AGENTDESK_BUDGET_ALERT_PERCENTS", cast=int, default=[80, 100]
)
# Flow analysis: record decision points (tool choice, risk verdicts, retries, approval outcomes)
# with each step's write (flow/runtime.py). Off: none are written; loop and stuck detection
# work either way.
AGENTDESK_FLOW_DECISION_POINTS = env.bool("AGENTDESK_FLOW_DECISION_POINTS", default=True)
# The understanding phase (understanding/, README "Understanding phase"): the weights of its
# confidence formula (seed 000's by default; divided by their sum), e.g.
# "entity_extraction=0.3,schema_mapping=0.3,pattern_match=0.2,no_ambiguities=0.2"; and how many
# clarification questions a run asks before it acts on its best understanding.
AGENTDESK_UNDERSTANDING_WEIGHTS = env.dict(
    "AGENTDESK_UNDERSTANDING_WEIGHTS",
    default={
        "entity_extraction": 0.3,
        "schema_mapping": 0.3,
        "pattern_match": 0.2,
        "no_ambiguities": 0.2,
    },
)
AGENTDESK_UNDERSTANDING_MAX_QUESTIONS = env.int("AGENTDESK_UNDERSTANDING_MAX_QUESTIONS", default=3)
if AGENTDESK_UNDERSTANDING_MAX_QUESTIONS < 0:
    raise ImproperlyConfigured("AGENTDESK_UNDERSTANDING_MAX_QUESTIONS must be 0 or more.")
# A worker's claim on a run; it must outlast the slowest model call (timeout x attempts).
AGENTDESK_LEASE_SECONDS = env.int("AGENTDESK_LEASE_SECONDS", default=300)
# Beat's lease reaper (agents.tasks.reap_expired_leases) runs this often: with the heartbeat
# timeout below, it bounds how long a dead worker's runs and a restarted broker's lost messages
# wait (at most timeout + interval, about 20 s).
AGENTDESK_REAPER_INTERVAL_SECONDS = env.float("AGENTDESK_REAPER_INTERVAL_SECONDS", default=10.0)
# Each worker process writes its heartbeat this often (ops/heartbeat.py); once it is this old
# while another worker kept beating (or the process stopped), the reaper hands its runs to
# another worker without waiting for their lease. Keep the timeout a few beats long: a worker
# that misses it loses its runs (safely: its writes are fenced); a process with no heartbeat row
# (an older version) keeps the lease only.
AGENTDESK_HEARTBEAT_SECONDS = env.float("AGENTDESK_HEARTBEAT_SECONDS", default=3.0)
AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS = env.float("AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS", default=10.0)
if not 0 < AGENTDESK_HEARTBEAT_SECONDS * 3 <= AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS:
    raise ImproperlyConfigured(
        "AGENTDESK_HEARTBEAT_TIMEOUT_SECONDS must be at least three times "
        "AGENTDESK_HEARTBEAT_SECONDS."
    )
# A worker given SIGTERM exits within this many seconds (agents/worker_drain.py): it takes no
# new delivery, its runs hand themselves back (pending, lease released) at their next step
# boundary, and whatever is still in flight when the period ends is released then. Keep it
# below the orchestrator's grace period (Kubernetes' terminationGracePeriodSeconds: 30).
AGENTDESK_WORKER_DRAIN_SECONDS = env.float("AGENTDESK_WORKER_DRAIN_SECONDS", default=20.0)
if AGENTDESK_WORKER_DRAIN_SECONDS <= 0:
    raise ImproperlyConfigured("AGENTDESK_WORKER_DRAIN_SECONDS must be more than 0.")
# A run whose database connection is lost mid-step waits this long for the database to answer
# again, then goes on from its last commit (core/database.py); past it, the run is left to the
# reaper (never failed for an outage). A run task that cannot claim its run for the same reason
# is retried by Celery every few seconds, for at most this long.
AGENTDESK_DB_OUTAGE_WAIT_SECONDS = env.float("AGENTDESK_DB_OUTAGE_WAIT_SECONDS", default=120.0)
# A run parked until a time at most this far off (a `wait` timer, a provider's rate limit) is also
# woken by a delayed Celery message at that time, not only by the reaper's next tick. Keep it
# below the broker's visibility timeout (Redis: 1 h), which would deliver a longer-delayed
# message twice.
AGENTDESK_PRECISE_WAKE_MAX_SECONDS = env.int("AGENTDESK_PRECISE_WAKE_MAX_SECONDS", default=900)
# A run still pending this long lost its delivery (or waits in a long queue): the reaper sends it
# again, once per period (a duplicate delivery finds it claimed and exits).
AGENTDESK_PENDING_REDELIVER_SECONDS = env.int("AGENTDESK_PENDING_REDELIVER_SECONDS", default=120)
# An event with subscribers still unprocessed this long lost its dispatch message (broker error at
# the emit, worker lost before the dispatch committed): the reaper sends it again, once per period
# (dispatch is idempotent: an event already processed starts nothing).
AGENTDESK_EVENT_REDISPATCH_SECONDS = env.int("AGENTDESK_EVENT_REDISPATCH_SECONDS", default=120)
# Agent runs in a row that start each other through events (A's event starts B, B's starts C):
# the events of a run at this depth start no agent (logged as a chain_too_deep skip).
AGENTDESK_MAX_RUN_CHAIN_DEPTH = env.int("AGENTDESK_MAX_RUN_CHAIN_DEPTH", default=5)
if not 0 <= AGENTDESK_MAX_RUN_CHAIN_DEPTH <= 1000:
    raise ImproperlyConfigured("AGENTDESK_MAX_RUN_CHAIN_DEPTH must be between 0 and 1000.")
# delegate_to_agent (teams/): a delegated run may spend at most this share of what the run that
# delegates may still spend (its own share, or the agency's daily budget left). The same depth
# limit as above bounds chains of delegations.
AGENTDESK_DELEGATION_BUDGET_SHARE = env.float("AGENTDESK_DELEGATION_BUDGET_SHARE", default=0.5)
if not 0 < AGENTDESK_DELEGATION_BUDGET_SHARE <= 1:
    raise ImproperlyConfigured("AGENTDESK_DELEGATION_BUDGET_SHARE must be above 0, at most 1.")
# Evaluations (evals/): the LLM judge of a test case's rubric. Its model on the agent's provider
# ("" = the agent's own model), and what the judge may spend a day per agency when no evaluation
# budget was set in the admin (Usage & budgets -> Evaluation budgets), apart from the runs' budget.
AGENTDESK_EVAL_JUDGE_MODEL = env.str("AGENTDESK_EVAL_JUDGE_MODEL", default="")
AGENTDESK_EVALUATION_BUDGET_USD = env.float("AGENTDESK_EVALUATION_BUDGET_USD", default=1.0)
if AGENTDESK_EVALUATION_BUDGET_USD < 0:
    raise ImproperlyConfigured("AGENTDESK_EVALUATION_BUDGET_USD must not be negative.")
# ...but not once it is this old: its moment has passed, and events left unprocessed by an older
# version (which did not mark events without subscribers) must not start agents now.
AGENTDESK_EVENT_REDISPATCH_MAX_AGE_SECONDS = env.int(
    "AGENTDESK_EVENT_REDISPATCH_MAX_AGE_SECONDS", default=86400
)
# Celery tasks (by name) every ended run is owed, recorded with its end and sent once that commits
# (agents/after_run.py). One still not done this long after (its message lost with a broker or a
# worker, or its task failed past its retries) is sent again by the reaper, once per period.
AGENTDESK_AFTER_RUN_TASKS = ["memory.after_run"]
AGENTDESK_AFTER_RUN_RESEND_SECONDS = env.int("AGENTDESK_AFTER_RUN_RESEND_SECONDS", default=120)
AGENTDESK_LLM_TIMEOUT_SECONDS = env.float("AGENTDESK_LLM_TIMEOUT_SECONDS", default=60.0)
# SDK clients (HTTP connection pools) per provider configuration and process; threads share them.
AGENTDESK_LLM_CLIENTS = env.int("AGENTDESK_LLM_CLIENTS", default=8)
# At most this many SDK clients per process (least recently used dropped): bounds the idle
# connection pools of many agencies' keys.
AGENTDESK_LLM_CLIENT_CACHE = env.int("AGENTDESK_LLM_CLIENT_CACHE", default=256)
AGENTDESK_LLM_MAX_RETRIES = env.int("AGENTDESK_LLM_MAX_RETRIES", default=2)
# Networks (CIDR) an agency's own LLM endpoint may be at although they are not public: the
# operator's model servers (e.g. an Ollama at 10.0.0.5 -> "10.0.0.5/32"). Empty: public only
# (agents/llm/endpoints.py). Cloud metadata addresses are refused regardless.
AGENTDESK_LLM_PRIVATE_NETWORKS = env.list("AGENTDESK_LLM_PRIVATE_NETWORKS", default=[])
# Single sign-on (sso/, README "Single sign-on"): networks (CIDR) an agency's OpenID Connect
# issuer may be at although they are not public (an in-house Keycloak at 10.0.0.7 ->
# "10.0.0.7/32"; plain http is accepted only there). Empty: public https issuers only. Cloud
# metadata addresses are refused regardless. The time limit of each call to the issuer.
AGENTDESK_SSO_PRIVATE_NETWORKS = env.list("AGENTDESK_SSO_PRIVATE_NETWORKS", default=[])
AGENTDESK_SSO_TIMEOUT_SECONDS = env.float("AGENTDESK_SSO_TIMEOUT_SECONDS", default=10.0)
# Single non-public servers an agency's endpoint may be at, as address:port ("127.0.0.1:8765"):
# that port of that address only. `manage.py up` adds its demo model's here for its children.
AGENTDESK_LLM_PRIVATE_ENDPOINTS = env.list("AGENTDESK_LLM_PRIVATE_ENDPOINTS", default=[])
# How long a process reuses what it read of tools, risk rules, prices and "no budget" (seconds):
# they are read on every run or step and change rarely. 0 reads them every time.
AGENTDESK_CATALOGUE_CACHE_SECONDS = env.float("AGENTDESK_CATALOGUE_CACHE_SECONDS", default=30.0)
# Deliveries of one run (first claim + resumes after a lost worker) before it is failed.
AGENTDESK_MAX_DELIVERIES = env.int("AGENTDESK_MAX_DELIVERIES", default=5)
# Durability tests only: SIGKILL the worker at a named point (agents/runtime/faults.py).
AGENTDESK_CRASH_AT = env.str("AGENTDESK_CRASH_AT", default="")

# A live update that finds the publishing thread idle goes to Redis at once; those that follow
# within this many milliseconds of the last batch go together at the window's end (one round trip,
# one wake-up of the thread): at most one batch per window, and no more delay than the window
# (bench.live_latency); 0 sends each as soon as it can.
AGENTDESK_BROADCAST_BATCH_MS = env.float("AGENTDESK_BROADCAST_BATCH_MS", default=5.0)
# A model call's text streams to the execution's watchers while it runs (a run nobody watches
# makes the unstreamed call); its batches go at the pace above. A worker asks Redis which of its
# runs are watched every this many seconds, in one command (agents/runtime/streaming.py).
AGENTDESK_TOKEN_STREAMING = env.bool("AGENTDESK_TOKEN_STREAMING", default=True)
AGENTDESK_TOKEN_WATCH_SECONDS = env.float("AGENTDESK_TOKEN_WATCH_SECONDS", default=0.5)

# --- Channels -----------------------------------------------------------------------------------
CHANNEL_LAYERS = {
    "default": {
        # The pub/sub layer delivered at p50 0.2 ms vs 0.65 ms for the core layer (DESIGN.md).
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

# --- REST framework -------------------------------------------------------------------------------
REST_FRAMEWORK: dict[str, Any] = {
    # API keys first: their "Bearer" challenge makes a missing credential a 401 rather than 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.api.authentication.ApiKeyAuthentication",
        "core.api.authentication.UserTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["core.api.permissions.RolePermission"],
    "DEFAULT_PARSER_CLASSES": ["core.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PAGINATION_CLASS": "core.api.pagination.PageNumberPagination",
    "PAGE_SIZE": 25,
    "DEFAULT_FILTER_BACKENDS": [
        "core.api.filtering.FilterBackend",
        "core.api.ordering.StableOrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "core.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "core.api.exceptions.exception_handler",
    # Per API key (or per user, for token and session logins): a burst and a sustained limit,
    # counted in Redis (core/api/throttling.py); past either, 429 with Retry-After.
    "DEFAULT_THROTTLE_CLASSES": [
        "core.api.throttling.BurstRateThrottle",
        "core.api.throttling.SustainedRateThrottle",
    ],
    "DEFAULT_THROTTLE_RATES": {
        "api_burst": env.str("AGENTDESK_API_THROTTLE_BURST", default="120/min"),
        "api_sustained": env.str("AGENTDESK_API_THROTTLE_SUSTAINED", default="5000/hour"),
        # Failed API keys and user tokens per client address (core/api/throttling.py).
        "api_bad_credentials": env.str("AGENTDESK_API_BAD_CREDENTIALS_RATE", default="20/min"),
        # Deliveries per webhook, accepted or refused (webhooks/throttling.py).
        "webhook": env.str("AGENTDESK_WEBHOOK_THROTTLE_RATE", default="120/min"),
    },
}
# How long POST /api/v1/agents/{id}/execute remembers an Idempotency-Key (core/api/idempotency.py).
AGENTDESK_IDEMPOTENCY_KEY_HOURS = env.int("AGENTDESK_IDEMPOTENCY_KEY_HOURS", default=24)
# Largest accepted API request body; bigger ones get a 413 before anything is parsed.
API_MAX_BODY_BYTES = 256 * 1024

# --- Inbound webhooks (webhooks/, README "Webhooks") ------------------------------------------
# Largest delivery body; a bigger one is refused with 413 before it is read whole.
AGENTDESK_WEBHOOK_MAX_BODY_BYTES = env.int("AGENTDESK_WEBHOOK_MAX_BODY_BYTES", default=256 * 1024)
# A delivery's X-AgentDesk-Timestamp may be this far from the server's clock (either way).
AGENTDESK_WEBHOOK_TOLERANCE_SECONDS = env.int("AGENTDESK_WEBHOOK_TOLERANCE_SECONDS", default=300)

# --- Outbound webhooks (webhooks/outbound/, README "Outbound webhooks") -----------------------
# Seconds to wait after each failed attempt (then the delivery has failed), each spread by +-20%.
AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE = env.list(
    "AGENTDESK_OUTBOUND_WEBHOOK_RETRY_SCHEDULE",
    cast=float,
    default=[5, 300, 1800, 7200, 18000, 36000],
)
# The whole attempt (DNS, connect, TLS, answer) ends after this many seconds: a failure.
AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS = env.float(
    "AGENTDESK_OUTBOUND_WEBHOOK_TIMEOUT_SECONDS", default=15.0
)
# A subscription is disabled after this many failed attempts in a row (0: never).
AGENTDESK_OUTBOUND_WEBHOOK_DISABLE_AFTER = env.int(
    "AGENTDESK_OUTBOUND_WEBHOOK_DISABLE_AFTER", default=20
)
# After a rotation, deliveries are signed with the previous secret too for this long.
AGENTDESK_OUTBOUND_WEBHOOK_ROTATION_OVERLAP_SECONDS = env.int(
    "AGENTDESK_OUTBOUND_WEBHOOK_ROTATION_OVERLAP_SECONDS", default=24 * 3600
)
# How much of a receiver's answer the delivery log keeps.
AGENTDESK_OUTBOUND_WEBHOOK_LOG_BYTES = env.int("AGENTDESK_OUTBOUND_WEBHOOK_LOG_BYTES", default=2048)
# http:// receivers (development only), and non-public networks receivers may be on (tests'
# loopback receivers); cloud metadata addresses are refused whatever is listed.
AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP = env.bool(
    "AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP", default=False
)
AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS = env.list(
    "AGENTDESK_OUTBOUND_WEBHOOK_PRIVATE_NETWORKS", default=[]
)

SPECTACULAR_SETTINGS = {
    "TITLE": "AgentDesk API",
    "DESCRIPTION": (
        "REST API of AgentDesk. Authenticate with an agency API key "
        "(`Authorization: Bearer adk_<prefix>_<secret>`), a user token (`Authorization: Token "
        "<key>`) or an admin session (with CSRF). Errors are always "
        '`{"message", "code", "extra"}`; field errors are in `extra.fields`. Superusers read '
        "across agencies and must name one with `?agency=<id>` for writes."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,  # request bodies without the read-only fields
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "core.api.schema.forbid_nul_in_requests",
    ],
    "ENUM_NAME_OVERRIDES": {
        "ExecutionStatusEnum": "agents.models.ExecutionStatus",
        "ApprovalStatusEnum": "approvals.models.ApprovalStatus",
        "RoleEnum": "core.models.Role",
        "RiskLevelEnum": "approvals.models.RiskLevel",
        "ProviderNameEnum": "agents.models.ProviderName",
        "ExecutionPurposeEnum": "agents.models.ExecutionPurpose",
        "UsagePurposeEnum": "usage.models.UsagePurpose",
    },
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Secrets at rest ------------------------------------------------------------------------------
# Fernet keys, primary first (core/crypto.py). Unset: development derives one from SECRET_KEY;
# production.py requires the variable.
AGENTDESK_ENCRYPTION_KEYS = env.list("AGENTDESK_ENCRYPTION_KEYS", default=[])

# --- Tools ----------------------------------------------------------------------------------------
# web_search provider: registered name or dotted path; empty = search off (tools/web_search.py).
AGENTDESK_WEB_SEARCH_PROVIDER = env.str("AGENTDESK_WEB_SEARCH_PROVIDER", default="")
# The most bytes one MCP call (discovery or tool call) may receive (tools/mcp/client.py).
MCP_MAX_RESPONSE_BYTES = env.int("AGENTDESK_MCP_MAX_RESPONSE_BYTES", default=5_000_000)
# AgentDesk's own MCP server (/mcp, protocols/mcp/): the longest a tool call waits for its run's
# result before it answers with the execution's id and status (a call's wait_seconds is capped).
AGENTDESK_MCP_WAIT_SECONDS = env.float("AGENTDESK_MCP_WAIT_SECONDS", default=30.0)

# --- Datasets (datasets/, README "Datasets", docs/decisions/0011-datasets.md) -------------------
# The largest file staff may upload, and the most rows a dataset holds (an upload or a CRM query).
AGENTDESK_DATASET_MAX_UPLOAD_BYTES = env.int(
    "AGENTDESK_DATASET_MAX_UPLOAD_BYTES", default=20_000_000
)
AGENTDESK_DATASET_MAX_ROWS = env.int("AGENTDESK_DATASET_MAX_ROWS", default=1_000_000)
# execute_sql / execute_query_plan: a query is interrupted past this many seconds; a result keeps at
# most this many rows (downloadable), of which the first INLINE_ROWS go back to the model; DuckDB's
# memory per call.
AGENTDESK_DATASET_QUERY_TIMEOUT_SECONDS = env.float(
    "AGENTDESK_DATASET_QUERY_TIMEOUT_SECONDS", default=10.0
)
AGENTDESK_DATASET_RESULT_MAX_ROWS = env.int("AGENTDESK_DATASET_RESULT_MAX_ROWS", default=10_000)
AGENTDESK_DATASET_INLINE_ROWS = env.int("AGENTDESK_DATASET_INLINE_ROWS", default=20)
AGENTDESK_DATASET_MEMORY_LIMIT_MB = env.int("AGENTDESK_DATASET_MEMORY_LIMIT_MB", default=256)
# execute_python's charts (matplotlib PNGs) kept with the run: one larger than this is dropped.
AGENTDESK_DATASET_CHART_MAX_BYTES = env.int("AGENTDESK_DATASET_CHART_MAX_BYTES", default=2_000_000)
# execute_python's sandbox (tools/sandbox/, README "Python sandbox"): "bubblewrap" on this
# machine, or "kubernetes" (a Job per script: manifests built, submitting not yet); its limits.
AGENTDESK_SANDBOX_EXECUTOR = env.str("AGENTDESK_SANDBOX_EXECUTOR", default="bubblewrap")
AGENTDESK_SANDBOX_WALL_SECONDS = env.float("AGENTDESK_SANDBOX_WALL_SECONDS", default=30.0)
AGENTDESK_SANDBOX_CPU_SECONDS = env.int("AGENTDESK_SANDBOX_CPU_SECONDS", default=10)
AGENTDESK_SANDBOX_MEMORY_MB = env.int("AGENTDESK_SANDBOX_MEMORY_MB", default=1024)
AGENTDESK_SANDBOX_PROCESSES = env.int("AGENTDESK_SANDBOX_PROCESSES", default=32)
AGENTDESK_SANDBOX_STDOUT_KB = env.int("AGENTDESK_SANDBOX_STDOUT_KB", default=64)
AGENTDESK_SANDBOX_SCRATCH_MB = env.int("AGENTDESK_SANDBOX_SCRATCH_MB", default=64)
AGENTDESK_SANDBOX_K8S_NAMESPACE = env.str("AGENTDESK_SANDBOX_K8S_NAMESPACE", default="agentdesk")
AGENTDESK_SANDBOX_K8S_IMAGE = env.str("AGENTDESK_SANDBOX_K8S_IMAGE", default="agentdesk:latest")
# The Job executor's credentials: empty, the worker's in-cluster service account; else a kubeconfig.
AGENTDESK_SANDBOX_K8S_KUBECONFIG = env.str("AGENTDESK_SANDBOX_K8S_KUBECONFIG", default="")
# Added to the wall limit for the Job's deadline: a sandbox pod's scheduling and start.
AGENTDESK_SANDBOX_K8S_START_SECONDS = env.float("AGENTDESK_SANDBOX_K8S_START_SECONDS", default=30.0)

# --- A2A (protocols/a2a/, README "A2A") -----------------------------------------------------------
# A message (and a cancel) waits at most this long for its task to settle before it answers with
# the task as it stands (the client then polls GetTask); a stream follows a task up to the other.
AGENTDESK_A2A_WAIT_SECONDS = env.float("AGENTDESK_A2A_WAIT_SECONDS", default=30.0)
AGENTDESK_A2A_STREAM_SECONDS = env.float("AGENTDESK_A2A_STREAM_SECONDS", default=600.0)
# A JSON-RPC request's body is refused past this size (a run's input is at most 20,000 chars).
AGENTDESK_A2A_MAX_BODY_BYTES = env.int("AGENTDESK_A2A_MAX_BODY_BYTES", default=1_000_000)

# --- Embeddings (memory/embeddings/, docs/decisions/0006-local-embeddings.md) --------------------
# The size of the memory and episode embedding columns: every model an agency may choose must
# return vectors of this size (the local all-MiniLM-L6-v2 does; OpenAI's text-embedding-3 models
# are asked for it). Changing it needs a migration of the columns and `reembed_memories --all`.
AGENTDESK_EMBEDDING_DIMENSIONS = env.int("AGENTDESK_EMBEDDING_DIMENSIONS", default=384)
# Texts per model call, and memories (and episodes) per `memory.embed_pending` task, which sends
# itself again while more wait: a worker is never held long by one agency's backlog.
AGENTDESK_EMBEDDING_BATCH_SIZE = env.int("AGENTDESK_EMBEDDING_BATCH_SIZE", default=32)
# The local model reads at most this many tokens of a text (the rest is cut off, as
# sentence-transformers does for this model); longer inputs cost quadratically more.
AGENTDESK_EMBEDDING_MAX_TOKENS = env.int("AGENTDESK_EMBEDDING_MAX_TOKENS", default=256)
# Threads of the local model's matrix products (numpy's BLAS, for the whole process once the
# model is loaded); 0 leaves BLAS its default, one per core. One is the default: on a machine
# whose cores are busy (a worker's runs, PostgreSQL) BLAS threads that spin-wait for each other
# were several times slower than one thread (bench/README.md "Embeddings").
AGENTDESK_EMBEDDING_THREADS = env.int("AGENTDESK_EMBEDDING_THREADS", default=1)
# An OpenAI(-compatible) embeddings call: seconds per attempt, and retries after the first.
AGENTDESK_EMBEDDING_TIMEOUT_SECONDS = env.float("AGENTDESK_EMBEDDING_TIMEOUT_SECONDS", default=30.0)
AGENTDESK_EMBEDDING_MAX_RETRIES = env.int("AGENTDESK_EMBEDDING_MAX_RETRIES", default=2)

# --- Memory search (memory/search.py) -------------------------------------------------------------
# Agents with at most this many memories matching a search's filters are searched exactly (every
# distance computed through the B-tree on the agent); above it, through the HNSW index with an
# iterative scan. Either way a search returns k results when k exist. The two cross between
# 1,000 and 3,000 rows (bench/README.md "Memory search").
AGENTDESK_MEMORY_EXACT_SEARCH_MAX_ROWS = env.int(
    "AGENTDESK_MEMORY_EXACT_SEARCH_MAX_ROWS", default=2000
)

# --- Memory in the runtime (agents/runtime/setup.py, memory/consolidation.py) --------------------
# A run starts with the memories and past runs at least this similar (cosine) to its instruction
# (memories found by their words alone too), within the agent's memory_token_budget.
AGENTDESK_MEMORY_RECALL_MIN_SIMILARITY = env.float(
    "AGENTDESK_MEMORY_RECALL_MIN_SIMILARITY", default=0.3
)
# Consolidation (beat, per agent; seed 004): agents with fewer memories are left alone; memories
# more similar than this are merged into one (the text by the agent's model); memories less
# important than PRUNE_IMPORTANCE, used fewer than PRUNE_ACCESS times and older than
# PRUNE_AGE_DAYS are deleted. Every change is recorded (memory.MemoryChange).
AGENTDESK_MEMORY_CONSOLIDATION_INTERVAL_SECONDS = env.float(
    "AGENTDESK_MEMORY_CONSOLIDATION_INTERVAL_SECONDS", default=6 * 3600.0
)
AGENTDESK_MEMORY_CONSOLIDATION_MIN_MEMORIES = env.int(
    "AGENTDESK_MEMORY_CONSOLIDATION_MIN_MEMORIES", default=100
)
AGENTDESK_MEMORY_MERGE_SIMILARITY = env.float("AGENTDESK_MEMORY_MERGE_SIMILARITY", default=0.9)
AGENTDESK_MEMORY_PRUNE_IMPORTANCE = env.int("AGENTDESK_MEMORY_PRUNE_IMPORTANCE", default=3)
AGENTDESK_MEMORY_PRUNE_ACCESS = env.int("AGENTDESK_MEMORY_PRUNE_ACCESS", default=2)
AGENTDESK_MEMORY_PRUNE_AGE_DAYS = env.int("AGENTDESK_MEMORY_PRUNE_AGE_DAYS", default=30)
# Expired conversations are deleted this often.
AGENTDESK_CONVERSATION_PURGE_INTERVAL_SECONDS = env.float(
    "AGENTDESK_CONVERSATION_PURGE_INTERVAL_SECONDS", default=600.0
)

# --- Operations: metrics and traces (ops/, README "Operations: metrics and traces") -------------
# Prometheus metrics: every process records its samples (runs, steps, model calls, tools...) and
# GET /metrics serves the sum over all of them. `false`: nothing is recorded and /metrics is 404.
AGENTDESK_METRICS = env.bool("AGENTDESK_METRICS", default=True)
# Where web, worker and beat processes write their samples (prometheus-client's multiprocess
# files, one set per process); shared by every process that /metrics should count (one host, or
# a volume shared by the containers). `manage.py up` removes the last run's samples at start.
PROMETHEUS_MULTIPROC_DIR = env.str(
    "PROMETHEUS_MULTIPROC_DIR", default=str(BASE_DIR / ".data" / "prometheus")
)
# Who may scrape: a client presenting this bearer token, or one from these addresses/networks
# without a token. A wrong token is refused even from an allowed address.
AGENTDESK_METRICS_TOKEN = env.str("AGENTDESK_METRICS_TOKEN", default="")
AGENTDESK_METRICS_ALLOWED_IPS = env.list(
    "AGENTDESK_METRICS_ALLOWED_IPS", default=["127.0.0.1", "::1"]
)
# A worker or beat serves its own samples directory's /metrics on this port (0: off). For pods
# that share no directory with a web process (deploy/kubernetes; ops/metrics/pod_server.py).
AGENTDESK_METRICS_PORT = env.int("AGENTDESK_METRICS_PORT", default=0)
# The scrape's own queries (approvals and questions waiting, queue depth) answer within this,
# or their metrics are left out of that scrape (a database outage must not fail it).
AGENTDESK_METRICS_QUERY_TIMEOUT_SECONDS = env.float(
    "AGENTDESK_METRICS_QUERY_TIMEOUT_SECONDS", default=1.5
)
# OpenTelemetry traces of runs, exported over OTLP/HTTP when an endpoint is set (off otherwise:
# the SDK is then never imported). OTEL_* variables the SDK reads (headers, sampler...) apply.
AGENTDESK_OTLP_ENDPOINT = env.str(
    "AGENTDESK_OTLP_ENDPOINT", default=env.str("OTEL_EXPORTER_OTLP_ENDPOINT", default="")
)
AGENTDESK_TRACING = bool(AGENTDESK_OTLP_ENDPOINT)
OTEL_SERVICE_NAME = env.str("OTEL_SERVICE_NAME", default="agentdesk")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        # A run's lines carry its execution (and trace) ids after the logger's name. Control
        # characters in messages (request input: a newline, a NUL) are escaped, never raw.
        "plain": {
            "class": "core.log_filters.EscapingFormatter",
            "format": "%(asctime)s %(levelname)s %(name)s%(run_context)s: %(message)s",
        }
    },
    "filters": {
        "run_context": {"()": "ops.log_context.RunContextFilter"},
        # Beat's fixed tasks (the lease reaper: every 10 s) log no "received" / "succeeded"
        # lines at INFO; their failures do, and so does every other task.
        "quiet_housekeeping": {
            "()": "core.log_filters.QuietHousekeeping",
            "tasks": sorted({entry["task"] for entry in CELERY_BEAT_SCHEDULE.values()}),
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["run_context", "quiet_housekeeping"],
        }
    },
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {
        "pgserver": {"level": "WARNING"},
        # django-axes says each step of a login at INFO; a failure and a lockout stay (WARNING).
        "axes": {"level": "WARNING"},
        # The HTTP clients under the LLM SDKs log every request at INFO; each model call is
        # recorded as a step with its latency and outcome already, and failures still log.
        **{
            name: {"level": env.str("LOG_LEVEL_HTTP", default="WARNING")}
            for name in ("httpx", "httpx2", "httpcore", "httpcore2")
        },
    },
}
