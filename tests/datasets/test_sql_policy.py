"""execute_sql's first fence: sqlglot's parse tree checked before DuckDB sees the query."""

from __future__ import annotations

import pytest

from datasets.sql_policy import SqlRefused, check

KNOWN = {"sales", "orders"}


@pytest.mark.parametrize(
    ("sql", "code"),
    [
        ("DROP TABLE sales", "not_select"),
        ("CREATE TABLE x AS SELECT * FROM sales", "not_select"),
        ("INSERT INTO sales VALUES (1)", "not_select"),
        ("UPDATE sales SET amount = 0", "not_select"),
        ("DELETE FROM sales", "not_select"),
        ("SELECT * INTO copy FROM sales", "not_select"),
        ("COPY sales TO 'out.csv'", "not_select"),
        ("ATTACH 'other.db'", "not_select"),
        ("INSTALL httpfs", "not_select"),
        ("LOAD httpfs", "not_select"),
        ("PRAGMA version", "not_select"),
        ("SET threads = 8", "not_select"),
        ("CALL pragma_version()", "not_select"),
        ("SELECT 1; SELECT 2", "multiple_statements"),
        ("SELECT * FROM sales; DROP TABLE sales", "multiple_statements"),
        ("SELECT * FROM read_csv('/etc/passwd')", "function_not_allowed"),
        ("SELECT * FROM read_parquet('s3://bucket/x.parquet')", "function_not_allowed"),
        ("SELECT read_text('/etc/passwd')", "function_not_allowed"),
        ("SELECT * FROM glob('/*')", "function_not_allowed"),
        ("SELECT getenv('HOME')", "function_not_allowed"),
        ("SELECT * FROM duckdb_settings()", "function_not_allowed"),
        ("SELECT * FROM query_table('sales')", "function_not_allowed"),
        ("SELECT * FROM '/etc/passwd'", "file_access_not_allowed"),
        ("SELECT * FROM 'https://example.com/data.parquet'", "file_access_not_allowed"),
        ("SELECT * FROM information_schema.tables", "unknown_dataset"),
        ("SELECT * FROM main.sales", "unknown_dataset"),
        ("SELECT * FROM secrets", "unknown_dataset"),
        ("", "invalid_sql"),
        ("SELEC * FROM sales", "invalid_sql"),
    ],
)
def test_a_query_that_breaks_a_rule_is_refused_with_its_reason(sql: str, code: str) -> None:
    with pytest.raises(SqlRefused) as refused:
        check(sql, known=KNOWN)

    assert refused.value.code == code
    assert refused.value.message


def test_a_select_names_the_datasets_it_reads_and_is_normalized_to_their_schema() -> None:
    checked = check(
        "WITH paid AS (SELECT * FROM sales WHERE status = 'paid') "
        "SELECT p.region, count(*) FROM paid p JOIN datasets.orders o ON o.region = p.region "
        "GROUP BY 1",
        known=KNOWN,
    )

    assert checked.datasets == ("orders", "sales")
    assert 'FROM datasets."sales"' in checked.sql
    assert 'JOIN datasets."orders"' in checked.sql
    assert "FROM paid" in checked.sql  # a CTE is not a dataset


def test_set_operations_of_selects_pass() -> None:
    checked = check("SELECT region FROM sales UNION SELECT region FROM orders", known=KNOWN)

    assert checked.datasets == ("orders", "sales")
