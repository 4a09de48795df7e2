"""The demo agency of ``manage.py up``: agents of the five types on the demo model (scripted, no
AI), contacts, a schedule and a risk rule, plus admin and approver logins. Data in
:mod:`devkit.demo.data`, writers in :mod:`devkit.demo.seed`."""

from devkit.demo.data import DEMO_AGENCY_SLUG
from devkit.demo.seed import DemoSeed, demo_data_seed, demo_model_port, demo_seed

__all__ = ["DEMO_AGENCY_SLUG", "DemoSeed", "demo_data_seed", "demo_model_port", "demo_seed"]
