"""What the soak's users need from the demo agency, made over HTTP as an admin would (the admin
session and the REST API): agent ids, an API key per client and one for the watchers, inbound
webhooks with their secrets, and run limits that a 10-minute soak does not reach."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

ADMIN = {"username": "demo", "password": "demo-agentdesk"}
APPROVER = {"username": "approver", "password": "demo-agentdesk"}
WEBHOOK_AGENT = "bi-agent"  # answers any instruction without asking a person
RUNS_PER_HOUR = 100_000  # the demo agents' 60 an hour would refuse the API clients' runs


def admin_session(base: str) -> httpx.Client:
    client = httpx.Client(base_url=base, timeout=30)
    client.get("/admin/login/")
    response = client.post(
        "/admin/login/",
        data={**ADMIN, "csrfmiddlewaretoken": client.cookies["csrftoken"], "next": "/admin/"},
    )
    if response.status_code != 302:
        raise RuntimeError(f"the demo admin cannot log in: {response.status_code}")
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    return client


def prepare(base: str, *, api_clients: int, webhooks: int) -> dict[str, Any]:
    admin = admin_session(base)
    try:
        listed = admin.get("/api/v1/agents/", params={"page_size": 100})
        listed.raise_for_status()
        agents = {a["slug"]: a["id"] for a in listed.json()["results"]}
        for agent_id in agents.values():
            admin.patch(
                f"/api/v1/agents/{agent_id}/",
                json={"max_runs_per_hour": RUNS_PER_HOUR, "max_runs_per_day": RUNS_PER_HOUR},
            ).raise_for_status()

        def key(name: str) -> str:
            made = admin.post("/api/v1/api-keys/", json={"name": name, "role": "staff"})
            made.raise_for_status()
            return str(made.json()["key"])

        hooks, run = [], uuid.uuid4().hex[:8]  # names are unique per agent: a fresh pair a run
        for n in range(webhooks):
            made = admin.post(
                f"/api/v1/agents/{agents[WEBHOOK_AGENT]}/webhooks/",
                json={"name": f"soak {run} {n}"},
            )
            made.raise_for_status()
            url = httpx.URL(made.json()["url"])
            hooks.append({"path": url.raw_path.decode(), "secret": made.json()["secret"]})
        return {
            "base": base,
            "admin": ADMIN,
            "approver": APPROVER,
            "agents": agents,
            "api_keys": [key(f"soak client {n}") for n in range(api_clients)],
            "watch_key": key("soak watchers"),
            "webhooks": hooks,
        }
    finally:
        admin.close()
