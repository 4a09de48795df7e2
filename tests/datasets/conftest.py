"""Fixtures of the built-in tools (a real execution and its ToolContext) and of the API (two
agencies with a member of each role), for the datasets' tests."""

from tests.admin.conftest import agency, login, other_agency  # noqa: F401 - fixtures
from tests.api.conftest import as_role, tenant_a, tenant_b  # noqa: F401 - fixtures
from tests.tools.builtin.conftest import ctx, execution, other_ctx  # noqa: F401 - fixtures
