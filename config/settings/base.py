"""Settings shared by every environment, with development defaults.

Every variable is documented in `.env.example`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote

import django_stubs_ext
import environ

from config.env import env, service_urls

# Generic admin/queryset classes (ModelAdmin[Agency]) at runtime, as the type stubs describe them.
django_stubs_ext.monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env_file = BASE_DIR / ".env"
if env_file.exists():
    environ.Env.read_env(str(env_file))

DEBUG = env.bool("DJANGO_DEBUG", default=True)
# Development-only default; production.py refuses to start without DJANGO_SECRET_KEY.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="dev-insecure-0f3c1e8a-agentdesk-change-me")
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    # core first: its `migrate` command overrides Django's to run as the owner role.
    "core",
    "agents",
    "tools",
    "memory",
    "approvals",
    "usage",
    "crm",
    "channels",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.postgres",  # ArrayField, GIN indexes
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_celery_beat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # After authentication: opens the request's transaction with the user's agency set.
    "core.middleware.TenantMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
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


def _database(url: str) -> dict[str, Any]:
    config: dict[str, Any] = environ.Env.db_url_config(url)
    # A unix-socket directory arrives percent-encoded in the URL's host part.
    config["HOST"] = unquote(config.get("HOST") or "")
    config["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
    config["CONN_HEALTH_CHECKS"] = True
    return config


SERVICES = service_urls()

DATABASES = {
    # The runtime role: not superuser, not BYPASSRLS, not the owner of any table.
    "default": _database(SERVICES.database),
    # The owner role: runs migrations (`manage.py migrate` uses it by default).
    "owner": _database(SERVICES.database_owner),
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = SERVICES.redis

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
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "admin:login"

# --- Celery -----------------------------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
CELERY_TASK_IGNORE_RESULT = True  # Results live in PostgreSQL; Celery only delivers work.
CELERY_TASK_ACKS_LATE = True  # A worker that dies mid-task leaves the message for another one.
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BEAT_SCHEDULER = "core.beat:DatabaseScheduler"
CELERY_RESULT_EXPIRES = None  # no result backend, so no `celery.backend_cleanup` entry
CELERY_TIMEZONE = TIME_ZONE
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- Channels -----------------------------------------------------------------------------------
CHANNEL_LAYERS = {
    "default": {
        # The pub/sub layer delivered at p50 0.2 ms vs 0.65 ms for the core layer (DESIGN.md).
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL]},
    }
}

# --- REST framework -------------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
}

# --- Secrets at rest ------------------------------------------------------------------------------
# Fernet keys, primary first (core/crypto.py). Unset: development derives one from SECRET_KEY;
# production.py requires the variable.
AGENTDESK_ENCRYPTION_KEYS = env.list("AGENTDESK_ENCRYPTION_KEYS", default=[])

# --- Demo data ------------------------------------------------------------------------------------
DEMO_ADMIN_USERNAME = env.str("AGENTDESK_DEMO_USERNAME", default="demo")
DEMO_ADMIN_PASSWORD = env.str("AGENTDESK_DEMO_PASSWORD", default="demo-agentdesk")

# --- Tools ----------------------------------------------------------------------------------------
# web_search provider: registered name or dotted path; empty = search off (tools/web_search.py).
AGENTDESK_WEB_SEARCH_PROVIDER = env.str("AGENTDESK_WEB_SEARCH_PROVIDER", default="")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"pgserver": {"level": "WARNING"}},
}
