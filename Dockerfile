# Image for web, worker and beat (docker-compose.yml). External PostgreSQL and Redis only.
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 DJANGO_SETTINGS_MODULE=config.settings.production
# Two glibc malloc arenas per process, not 8 per core: web and worker run many threads, and each
# arena keeps the memory freed in it (bench/README.md "Soak"; manage.py up sets it too).
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY pyproject.toml constraints.txt ./
COPY . .
# uv, not pip: pyproject's exclude-dependencies keeps PyTorch out (docs/decisions/0006).
RUN pip install "uv>=0.10" && uv pip install --system --compile-bytecode -c constraints.txt . \
    && python -m compileall -q . \
    && useradd --system --home /app agentdesk \
    && mkdir -p /var/lib/agentdesk/metrics && chown agentdesk /var/lib/agentdesk/metrics \
    && DJANGO_SECRET_KEY=build DJANGO_ALLOWED_HOSTS=x AGENTDESK_ENCRYPTION_KEYS=build \
       DATABASE_URL=postgres://x@x/x \
       REDIS_URL=redis://x python manage.py collectstatic --noinput
USER agentdesk
EXPOSE 8000
CMD ["uvicorn", "config.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--ws-per-message-deflate", "false"]
