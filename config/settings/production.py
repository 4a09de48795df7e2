"""Production: every secret from the environment, HTTPS, no debug. Used by docker-compose.yml."""

from config.env import env
from config.settings.base import *  # noqa: F403

DEBUG = False
SECRET_KEY = env.str("DJANGO_SECRET_KEY")  # no default: refuse to start without one
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS")

SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = env.bool("DJANGO_SECURE_COOKIES", default=True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
