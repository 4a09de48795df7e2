"""The query plan DSL: compiled deterministically (the same plan gives the same SQL, whatever
order its keys came in), identifiers quoted and values written as literals, and the rules beyond
the JSON Schema refused with what to change."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from datasets.query_plan import SCHEMA_JSON, PlanRefused, compile_plan

COLUMNS = ["region", "amount", "order_date", "status", 'odd "name']
PLAN: dict[str, Any] = {
    "dataset": "sales",
    "select": [
        {"column": "region"},
        {"column": "order_date", "grain": "month", "as": "month"},
        {"agg": "sum", "column": "amount", "as": "total"},
    ],
    "filters": [
        {"column": "status", "op": "in", "value": ["paid", "it's shipped"]},
        {"column": "amount", "op": "between", "value": [1, 99.5]},
        {"column": 'odd "name', "op": "not_null"},
    ],
    "group_by": ["region", "month"],
    "order_by": [{"column": "total", "direction": "desc"}],
    "limit": 10,
}


def test_a_plan_compiles_to_the_same_sql_every_time() -> None:
    reordered = json.loads(json.dumps(dict(reversed(list(PLAN.items())))))

    first = compile_plan(PLAN, columns=COLUMNS)

    assert compile_plan(reordered, columns=COLUMNS) == first
    assert first == (
        'SELECT "region" AS "region", CAST(date_trunc(\'month\', "order_date") AS DATE) AS '
        '"month", sum("amount") AS "total" FROM datasets."sales" WHERE "status" IN (\'paid\', '
        '\'it\'\'s shipped\') AND "amount" BETWEEN 1 AND 99.5 AND "odd ""name" IS NOT NULL '
        'GROUP BY "region", CAST(date_trunc(\'month\', "order_date") AS DATE) '
        'ORDER BY "total" DESC NULLS LAST LIMIT 10'
    )


def test_the_example_plan_is_valid_against_the_schema() -> None:
    jsonschema.validate(PLAN, SCHEMA_JSON)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"select": [{"column": "colour"}]}, "no column 'colour'"),
        ({"select": [{"column": "region"}, {"agg": "count"}], "group_by": []}, "group_by"),
        ({"select": [{"column": "region"}], "group_by": ["region"]}, "needs an aggregate"),
        ({"select": [{"agg": "sum"}]}, "needs a 'column'"),
        ({"select": [{"column": "region"}, {"column": "region"}]}, "Two selected outputs"),
        ({"order_by": [{"column": "amount"}]}, "not a selected output"),
        ({"filters": [{"column": "amount", "op": "gt"}]}, "needs a 'value'"),
        ({"filters": [{"column": "amount", "op": "between", "value": [1]}]}, "two items"),
    ],
)
def test_a_plan_that_breaks_a_rule_says_what_to_change(change: dict[str, Any], words: str) -> None:
    with pytest.raises(PlanRefused, match=words):
        compile_plan({**PLAN, **change}, columns=COLUMNS)


def test_a_value_cannot_break_out_of_its_literal() -> None:
    plan = {
        "dataset": "sales",
        "select": [{"agg": "count"}],
        "filters": [{"column": "region", "op": "eq", "value": "x'); DROP TABLE sales; --"}],
    }

    sql = compile_plan(plan, columns=COLUMNS)

    assert sql.endswith("WHERE \"region\" = 'x''); DROP TABLE sales; --'")
