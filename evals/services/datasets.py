"""Datasets and their immutable versions: every change to the cases (one added, changed or
removed, a JSONL import) makes a new version holding a copy of every case, as agent versions
do. Cases are validated before anything is written: a bad one is a 400 naming it, and nothing
of the change is kept.

Preconditions for every service: in the dataset's agency context."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, NotRequired, TypedDict

from django.db import transaction
from django.db.models import Max

from agents.models import Agent, TriggerType
from core.exceptions import ApplicationError
from evals.expectations import validate_expectations
from evals.matching import validate_recorded_calls
from evals.models import Dataset, DatasetVersion, TestCase


class CaseData(TypedDict):
    """A case as written by hand, imported or exported (one JSONL line)."""

    name: str
    key: NotRequired[str]
    input: NotRequired[str]
    trigger_type: NotRequired[str]
    trigger_payload: NotRequired[dict[str, Any]]
    conversation: NotRequired[list[Any]]
    recorded_calls: NotRequired[list[dict[str, Any]]]
    expectations: NotRequired[dict[str, Any]]
    source_execution_id: NotRequired[str | None]


FIELDS = frozenset(CaseData.__annotations__)
MAX_CASES = 5000


def _bad(message: str) -> ApplicationError:
    # 422: the request was well formed (the API's schema cannot state a case's rules).
    return ApplicationError("invalid_case", message, status=422)


def validate_case(data: Any, *, where: str = "case") -> CaseData:  # noqa: PLR0912 - one per field
    """``data`` checked as a case (400 naming the first fault and where it is)."""
    if not isinstance(data, dict):
        raise _bad(f"{where}: a JSON object is expected.")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise _bad(f"{where}: unknown field(s) {', '.join(unknown)}.")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise _bad(f"{where}.name: a name of 1 to 200 characters is required.")
    if "key" in data:
        try:
            uuid.UUID(str(data["key"]))
        except ValueError:
            raise _bad(f"{where}.key: a UUID is expected.") from None
    if not isinstance(data.get("input", ""), str):
        raise _bad(f"{where}.input: a text is expected.")
    if data.get("trigger_type", TriggerType.MANUAL) not in TriggerType.values:
        raise _bad(f"{where}.trigger_type: one of {', '.join(TriggerType.values)}.")
    if not isinstance(data.get("trigger_payload", {}), dict):
        raise _bad(f"{where}.trigger_payload: a JSON object is expected.")
    if not isinstance(data.get("conversation", []), list):
        raise _bad(f"{where}.conversation: a list of messages is expected.")
    if (fault := validate_recorded_calls(data.get("recorded_calls", []))) is not None:
        raise _bad(f"{where}.{fault}")
    try:
        validate_expectations(data.get("expectations", {}), where=f"{where}.expectations")
    except ApplicationError as exc:
        raise _bad(exc.message) from None
    source = data.get("source_execution_id")
    if source is not None:
        try:
            uuid.UUID(str(source))
        except ValueError:
            raise _bad(f"{where}.source_execution_id: a UUID is expected.") from None
    return data  # type: ignore[return-value]


def case_data(case: TestCase) -> CaseData:
    return {
        "key": str(case.key),
        "name": case.name,
        "input": case.input,
        "trigger_type": case.trigger_type,
        "trigger_payload": case.trigger_payload,
        "conversation": case.conversation,
        "recorded_calls": case.recorded_calls,
        "expectations": case.expectations,
        "source_execution_id": str(case.source_execution_id) if case.source_execution_id else None,
    }


def dataset_create(
    *,
    agency_id: uuid.UUID,
    name: str,
    agent: Agent | None = None,
    description: str = "",
    user_id: int | None = None,
) -> Dataset:
    """A dataset with an empty version 1; 400 when the agency has one of that name."""
    name = name.strip()
    if not name or len(name) > 200:
        raise ApplicationError(
            "invalid_name", "A dataset needs a name of 1 to 200 characters.", status=422
        )
    if agent is not None and agent.agency_id != agency_id:
        raise ApplicationError("invalid_agent", "No such agent.", status=422)
    with transaction.atomic():
        if Dataset.objects.filter(agency_id=agency_id, name=name).exists():
            raise ApplicationError(
                "duplicate_name", f"A dataset named {name!r} exists already.", status=409
            )
        dataset = Dataset.objects.create(
            agency_id=agency_id,
            agent=agent,
            name=name,
            description=description,
            created_by_id=user_id,
        )
        _new_version(dataset, [], summary="created", user_id=user_id)
    return dataset


def current_cases(dataset: Dataset) -> list[CaseData]:
    if dataset.current_version_id is None:
        return []
    return [case_data(c) for c in TestCase.objects.filter(version_id=dataset.current_version_id)]


def dataset_version_create(
    *, dataset: Dataset, cases: Sequence[Any], summary: str, user_id: int | None
) -> DatasetVersion:
    """A new version of ``dataset`` holding exactly ``cases`` (each validated first)."""
    checked = [validate_case(c, where=f"cases[{i}]") for i, c in enumerate(cases)]
    if len(checked) > MAX_CASES:
        raise _bad(f"A dataset version holds at most {MAX_CASES} cases.")
    keys = [c.get("key") for c in checked if c.get("key")]
    if len(keys) != len(set(keys)):
        raise _bad("Two cases have the same key.")
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        version = _new_version(locked, checked, summary=summary, user_id=user_id)
    dataset.current_version_id = version.pk
    return version


def _new_version(
    dataset: Dataset, cases: Iterable[CaseData], *, summary: str, user_id: int | None
) -> DatasetVersion:
    last = dataset.versions.aggregate(n=Max("number"))["n"] or 0
    version = DatasetVersion.objects.create(
        agency_id=dataset.agency_id,
        dataset=dataset,
        number=last + 1,
        change_summary=summary[:300],
        created_by_id=user_id,
    )
    TestCase.objects.bulk_create(
        [
            TestCase(
                agency_id=dataset.agency_id,
                version=version,
                key=uuid.UUID(str(c["key"])) if c.get("key") else uuid.uuid4(),
                position=position,
                name=c["name"].strip(),
                input=c.get("input", ""),
                trigger_type=c.get("trigger_type", TriggerType.MANUAL),
                trigger_payload=c.get("trigger_payload", {}),
                conversation=c.get("conversation", []),
                recorded_calls=c.get("recorded_calls", []),
                expectations=c.get("expectations", {}),
                source_execution_id=c.get("source_execution_id") or None,
            )
            for position, c in enumerate(cases, start=1)
        ]
    )
    dataset.current_version = version
    dataset.save(update_fields=["current_version", "updated_at"])
    return version


def dataset_case_add(*, dataset: Dataset, case: CaseData, user_id: int | None) -> DatasetVersion:
    cases = [*current_cases(dataset), {k: v for k, v in case.items() if k != "key"}]
    return dataset_version_create(
        dataset=dataset, cases=cases, summary=f"added {case.get('name', '')!s}", user_id=user_id
    )


def dataset_case_change(
    *, dataset: Dataset, key: str, changes: dict[str, Any], user_id: int | None
) -> DatasetVersion:
    """A new version with the case ``key`` changed (``changes``: some of its fields)."""
    cases = current_cases(dataset)
    found = next((c for c in cases if c.get("key") == str(key)), None)
    if found is None:
        raise ApplicationError(
            "no_such_case", "The dataset's current version has no such case.", status=404
        )
    found.update(changes)  # type: ignore[typeddict-item]
    found["key"] = str(key)
    return dataset_version_create(
        dataset=dataset, cases=cases, summary=f"changed {found.get('name')!s}", user_id=user_id
    )


def dataset_case_remove(*, dataset: Dataset, key: str, user_id: int | None) -> DatasetVersion:
    cases = current_cases(dataset)
    kept = [c for c in cases if c.get("key") != str(key)]
    if len(kept) == len(cases):
        raise ApplicationError(
            "no_such_case", "The dataset's current version has no such case.", status=404
        )
    return dataset_version_create(dataset=dataset, cases=kept, summary="removed", user_id=user_id)


def export_jsonl(version: DatasetVersion) -> str:
    """One case per line, in order (what :func:`dataset_import_jsonl` reads)."""
    return "".join(
        json.dumps(case_data(case), ensure_ascii=False, sort_keys=True) + "\n"
        for case in version.cases.all()
    )


def dataset_import_jsonl(*, dataset: Dataset, text: str, user_id: int | None) -> DatasetVersion:
    """A new version: the current cases, with each imported line added (or, when its ``key``
    is a current case's, put in that case's place). Every line is checked before anything is
    written: a bad one is a 400 naming its line."""
    imported: list[CaseData] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise _bad(f"line {number}: not JSON ({exc}).") from None
        imported.append(validate_case(parsed, where=f"line {number}"))
    if not imported:
        raise _bad("The file holds no case (one JSON object per line is expected).")
    replacing = {str(c["key"]): c for c in imported if c.get("key")}
    cases = [replacing.pop(str(c.get("key")), c) for c in current_cases(dataset)]
    cases += [c for c in imported if not c.get("key") or str(c.get("key")) in replacing]
    return dataset_version_create(
        dataset=dataset, cases=cases, summary=f"imported {len(imported)} case(s)", user_id=user_id
    )
