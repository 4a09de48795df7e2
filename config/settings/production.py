"""Production: every secret from the environment, HTTPS, no debug. Used by docker-compose.yml."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env
from config.settings.base import *  # noqa: F403

DEBUG = False
SECRET_KEY = env.str("DJANGO_SECRET_KEY")  # no default: refuse to start without one
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")
# No default and never derived from SECRET_KEY: stored provider keys need their own keys.
AGENTDESK_ENCRYPTION_KEYS = [key for key in env.list("AGENTDESK_ENCRYPTION_KEYS") if key.strip()]
if not AGENTDESK_ENCRYPTION_KEYS:
    raise ImproperlyConfigured("Set AGENTDESK_ENCRYPTION_KEYS (core/crypto.py) in production")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
WHITENOISE_AUTOREFRESH = False  # static files as collectstatic gathered them, indexed at start

# Production sends mail: Django's SMTP backend (AGENTDESK_MAIL_OPTIONS gives its host) unless
# another is named. The development default only logs each e-mail, one-time links included.
MAILERS["default"]["BACKEND"] = env.str(  # noqa: F405
    "AGENTDESK_MAIL_BACKEND", default="django.core.mail.backends.smtp.EmailBackend"
)
