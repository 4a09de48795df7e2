"""The API tests' tenants and clients, and the admin tests' agency and logins."""

from tests.admin.conftest import agency, login, other_agency  # noqa: F401
from tests.api.conftest import as_role, superuser, tenant_a, tenant_b  # noqa: F401
