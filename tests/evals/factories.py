"""Factories of the evaluations' rows; each inherits the agency of its dataset or agent."""

from __future__ import annotations

import factory

from evals.models import Dataset, DatasetVersion, Experiment, TestCase
from tests.agents.factories import AgentFactory
from tests.factories import AgencyFactory, TenantFactory


class DatasetFactory(TenantFactory[Dataset]):
    class Meta:
        model = Dataset

    agency = factory.SubFactory(AgencyFactory)
    name = factory.Sequence(lambda n: f"Dataset {n}")


class DatasetVersionFactory(TenantFactory[DatasetVersion]):
    class Meta:
        model = DatasetVersion

    dataset = factory.SubFactory(DatasetFactory)
    agency = factory.SelfAttribute("dataset.agency")
    number = factory.Sequence(lambda n: n + 1)


class TestCaseFactory(TenantFactory[TestCase]):
    class Meta:
        model = TestCase

    version = factory.SubFactory(DatasetVersionFactory)
    agency = factory.SelfAttribute("version.agency")
    name = factory.Sequence(lambda n: f"Case {n}")
    input = "Follow up with Marcus."
    expectations = factory.LazyFunction(lambda: {"final_status": "completed"})


class ExperimentFactory(TenantFactory[Experiment]):
    class Meta:
        model = Experiment

    dataset_version = factory.SubFactory(DatasetVersionFactory)
    agency = factory.SelfAttribute("dataset_version.agency")
    agent = factory.SubFactory(AgentFactory, agency=factory.SelfAttribute("..agency"))
    case_count = 1
