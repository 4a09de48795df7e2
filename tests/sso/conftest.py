from __future__ import annotations

from tests.admin.conftest import agency, login, other_agency, superuser  # noqa: F401
