"""What a model's SQL may be, checked on sqlglot's parse tree before DuckDB sees it (seed 002's
SQL guardrails): one statement, SELECT or WITH ... SELECT (set operations of them too), no
statement of another kind anywhere inside it (DDL, DML, COPY, ATTACH, PRAGMA, SET, INSTALL,
LOAD), no table function and no function that reads a file, a URL, the environment or the
engine's own catalogue, and tables only the agency's datasets, named ``datasets.<name>`` or
``<name>`` (normalized to the former) or a CTE of the query.

The checked query is given back as SQL that sqlglot wrote from the tree (so what runs is what
was checked). DuckDB is locked down as well (:mod:`datasets.engine`): this is the first fence.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from datasets.engine import SCHEMA

MAX_SQL_CHARS = 20_000

# Statement kinds refused wherever they appear (sqlglot parses DuckDB's PRAGMA, SET, COPY, ...).
_REFUSED_NODES: tuple[type[exp.Expr], ...] = (
    exp.DML,
    exp.DDL,
    exp.Into,
    exp.Command,
    exp.Copy,
    exp.Attach,
    exp.Detach,
    exp.Pragma,
    exp.Set,
    exp.Install,
    exp.Use,
    exp.Describe,
    exp.Summarize,
    exp.Transaction,
    exp.Commit,
    exp.Rollback,
)
# Functions that reach outside the tables (files, URLs, the environment, other databases, the
# catalogue, dynamic SQL), by name or prefix, lower case.
_REFUSED_FUNCTIONS = frozenset(
    {
        "glob",
        "getenv",
        "query",
        "query_table",
        "current_setting",
        "load_extension",
        "sniff_csv",
        "which_secret",
        "file",
        "to_parquet",
        "checkpoint",
        "force_checkpoint",
        "enable_logging",
    }
)
_REFUSED_PREFIXES = (
    "read_",
    "parquet_",
    "duckdb_",
    "pragma_",
    "iceberg_",
    "delta_",
    "sqlite_",
    "postgres_",
    "mysql_",
    "json_execute",
    "install_",
    "load_",
    "httpfs",
    "s3",
)


class SqlRefused(Exception):
    """The query breaks a rule; the message says which, for the model to correct it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class CheckedSql:
    sql: str  # the normalized query: datasets.<name> everywhere
    datasets: tuple[str, ...]  # the datasets it reads, sorted


def check(sql: str, *, known: Collection[str]) -> CheckedSql:
    """Parse and check ``sql``; ``known`` are the names of the agency's datasets."""
    text = sql.strip()
    if not text:
        raise SqlRefused("invalid_sql", "The query is empty.")
    if len(text) > MAX_SQL_CHARS:
        raise SqlRefused("invalid_sql", f"The query is longer than {MAX_SQL_CHARS} characters.")
    try:
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    except ParseError as error:
        raise SqlRefused("invalid_sql", f"The query does not parse: {_first(error)}") from error
    if len(statements) != 1:
        raise SqlRefused(
            "multiple_statements",
            f"Send exactly one statement (this has {len(statements)}); no ';' between queries.",
        )
    tree = statements[0]
    if not isinstance(tree, exp.Select | exp.SetOperation):
        raise SqlRefused(
            "not_select", f"Only SELECT (or WITH ... SELECT) is allowed, not {_kind(tree)}."
        )
    for node in tree.walk():
        if isinstance(node, _REFUSED_NODES):
            raise SqlRefused(
                "not_select", f"Only SELECT (or WITH ... SELECT) is allowed: found {_kind(node)}."
            )
        if isinstance(node, exp.Func):
            _check_function(node)
    used = _normalize_tables(tree, known)
    return CheckedSql(sql=tree.sql(dialect="duckdb"), datasets=tuple(sorted(used)))


def _check_function(node: exp.Func) -> None:
    name = (node.name if isinstance(node, exp.Anonymous) else node.sql_name()).lower()
    if name in _REFUSED_FUNCTIONS or name.startswith(_REFUSED_PREFIXES):
        raise SqlRefused(
            "function_not_allowed",
            f"The function {name}() is not allowed: queries read only the agency's datasets, "
            "never files, URLs, settings or the engine's catalogue.",
        )


def _normalize_tables(tree: exp.Expression, known: Collection[str]) -> set[str]:
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    used: set[str] = set()
    for table in list(tree.find_all(exp.Table)):
        if not isinstance(table.this, exp.Identifier):
            raise SqlRefused(
                "function_not_allowed",
                "Table functions are not allowed in FROM: read the agency's datasets by name.",
            )
        name = table.name
        if any(mark in name for mark in ("/", "\\", ":", ".")) or table.catalog:
            raise SqlRefused(
                "file_access_not_allowed",
                f"{name[:100]!r} is not a dataset: files and URLs cannot be read.",
            )
        lowered = name.lower()
        if not table.db and lowered in ctes:
            continue
        if table.db and table.db.lower() != SCHEMA:
            raise SqlRefused(
                "unknown_dataset",
                f"{table.db}.{name} is not a dataset: name datasets as datasets.<name>.",
            )
        if lowered not in known:
            raise SqlRefused(
                "unknown_dataset",
                f"There is no dataset {lowered!r} in this agency"
                + (f"; there are: {', '.join(sorted(known)[:30])}." if known else "; it has none."),
            )
        used.add(lowered)
        table.set("this", exp.to_identifier(lowered, quoted=True))
        table.set("db", exp.to_identifier(SCHEMA))
    return used


def _kind(node: exp.Expr) -> str:
    return node.key.upper()


def _first(error: ParseError) -> str:
    return str(error).strip().splitlines()[0][:300]
