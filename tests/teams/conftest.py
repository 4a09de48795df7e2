"""The admin tests' agency, staff login and client, for the run page's messages."""

from tests.admin.conftest import agency, login, staff

__all__ = ["agency", "login", "staff"]
