"""The TLS set-up every SDK client of this process shares.

Left to itself, each SDK client builds its own SSL context and loads the whole CA bundle into it:
~24 ms of CPU and ~0.8 MB per client, and a worker keeps a client per agency configuration and
shard (:mod:`agents.llm.factory`) — hundreds of megabytes for a few hundred agencies. One context,
made exactly as the SDKs' HTTP library makes its default (``trust_env``: ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` are honoured), serves them all: an ``SSLContext`` is safe to share between
threads and connections.
"""

from __future__ import annotations

import functools
import ssl

import httpx2  # the HTTP library of both SDKs


@functools.cache
def shared_ssl_context() -> ssl.SSLContext:
    return httpx2.create_ssl_context()
