"""Random secrets a person copies: a webhook's secret, an API key.

Base58's letters and digits: none that a person copying by eye mistakes for another (no 0 O I l),
and no '-' or '_', at which a double click stops selecting. Each character holds log2(58) = 5.86
random bits, so 44 of them hold 257, as many as 32 random bytes.
"""

from __future__ import annotations

import secrets

BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
SECRET_LENGTH = 44  # 257 bits


def readable_secret(length: int = SECRET_LENGTH) -> str:
    return "".join(secrets.choice(BASE58) for _ in range(length))
