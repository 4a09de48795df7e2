"""Development: the shared settings plus the devkit app (the demo model, the demo seed,
``manage.py up`` and ``manage.py embedded``), with the embedded PostgreSQL and Redis standing in
for DATABASE_URL / REDIS_URL when they are unset. The default of manage.py, config.asgi and
config.celery_app; config.settings.test builds on it. Production loads none of this."""

from config.env import env, use_when_unset
from devkit.services import embedded_service_urls

# Before base reads where the services are (config/env.py).
use_when_unset(embedded_service_urls)

from config.settings.base import *  # noqa: E402, F403
from config.settings.base import INSTALLED_APPS  # noqa: E402

INSTALLED_APPS = [*INSTALLED_APPS, "devkit"]
# Outbound webhooks may go to http:// receivers (README "Outbound webhooks").
AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP = env.bool(
    "AGENTDESK_OUTBOUND_WEBHOOK_ALLOW_HTTP", default=True
)

# --- Demo data (devkit.demo, seeded by `manage.py up`) --------------------------------------------
DEMO_ADMIN_USERNAME = env.str("AGENTDESK_DEMO_USERNAME", default="demo")
DEMO_ADMIN_PASSWORD = env.str("AGENTDESK_DEMO_PASSWORD", default="demo-agentdesk")
# A second demo login with the approver role (decides approvals, reads the rest); same password.
DEMO_APPROVER_USERNAME = env.str("AGENTDESK_DEMO_APPROVER_USERNAME", default="approver")
