# Image for web, worker and beat (docker-compose.yml, deploy/kubernetes). External PostgreSQL and
# Redis only. It runs on a read-only root filesystem as a numeric non-root user (Kubernetes'
# runAsNonRoot can only check a numeric one): everything written at run time goes to /tmp and
# the metrics directory, volumes of their own; the bytecode and the static files are made here.
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 DJANGO_SETTINGS_MODULE=config.settings.production \
    PYTHONDONTWRITEBYTECODE=1
# Two glibc malloc arenas per process, not 8 per core: web and worker run many threads, and each
# arena keeps the memory freed in it (bench/README.md "Soak"; manage.py up sets it too).
ENV MALLOC_ARENA_MAX=2
WORKDIR /app
COPY pyproject.toml constraints.txt ./
COPY . .
# uv, not pip: pyproject's exclude-dependencies keeps PyTorch out (docs/decisions/0006).
RUN pip install "uv>=0.10" && uv pip install --system --compile-bytecode -c constraints.txt ".[kubernetes]" \
    && python -m compileall -q . \
    && groupadd --system --gid 10001 agentdesk \
    && useradd --system --uid 10001 --gid 10001 --home-dir /app --no-create-home agentdesk \
    && mkdir -p /var/lib/agentdesk/metrics && chown 10001:10001 /var/lib/agentdesk/metrics \
    && DJANGO_SECRET_KEY=build DJANGO_ALLOWED_HOSTS=x AGENTDESK_ENCRYPTION_KEYS=build \
       DATABASE_URL=postgres://x@x/x \
       REDIS_URL=redis://x python manage.py collectstatic --noinput
USER 10001:10001
EXPOSE 8000
CMD ["uvicorn", "config.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--ws-per-message-deflate", "false"]
