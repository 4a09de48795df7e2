# The admin's and the API's fixtures (staff logins, two tenants with a member of each role).
from tests.admin.conftest import agency, login, other_agency, staff  # noqa: F401
from tests.api.conftest import tenant_a, tenant_b  # noqa: F401
