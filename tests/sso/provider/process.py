"""Start and stop the test provider (serve.py) in a second process."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devkit import embedded

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "provider-pw-42"
# One client per behaviour; the validator (validator.py) tampers by client name.
CLIENT_NAMES = ("ok", "wrong-aud", "expired", "wrong-iss")


@dataclass
class OidcProvider:
    """django-oauth-toolkit as an OpenID Connect provider on 127.0.0.1, with its users (password
    ``PASSWORD``) and one confidential client per name in ``CLIENT_NAMES``."""

    redirect_uri: str
    users: dict[str, str]  # username -> e-mail address
    port: int = field(default_factory=embedded.free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}/o"

    def client(self, name: str) -> tuple[str, str]:
        """(client id, client secret) of the client ``name``."""
        return f"agentdesk-{name}", f"secret-of-{name}-0123456789abcdef"

    def start(self) -> OidcProvider:
        self.data = Path(tempfile.mkdtemp(prefix="oidc-provider-"))
        spec: dict[str, Any] = {
            "data": str(self.data),
            "port": self.port,
            "users": [
                {"username": u, "email": e, "password": PASSWORD} for u, e in self.users.items()
            ],
            "clients": [
                {
                    "name": n,
                    "client_id": self.client(n)[0],
                    "client_secret": self.client(n)[1],
                    "redirect_uri": self.redirect_uri,
                }
                for n in CLIENT_NAMES
            ],
        }
        (self.data / "spec.json").write_text(json.dumps(spec))
        self.log = self.data / "provider.log"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.sso.provider.serve", str(self.data / "spec.json")],
            cwd=ROOT, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the provider exited:\n{self.log.read_text()[-3000:]}")
            if embedded.port_open(self.port):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"the provider is not listening:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
