"""docs/schema.md accounts for every column of every seed table, and names only real fields.

The seeds live next to the repository (``../shared/seeds``). Each ``CREATE TABLE`` (and each
``ALTER TABLE ... ADD COLUMN``) contributes ``table.column`` pairs; the doc has one section per
seed file (``## <file name>``) with a row per column whose "home" is ``app.Model.field``
reference(s) or a ``dropped:`` reason.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.apps import apps
from django.core.exceptions import FieldDoesNotExist

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO.parent / "shared" / "seeds"
DOC = REPO / "docs" / "schema.md"

APP_LABELS = ("core", "agents", "tools", "memory", "approvals", "usage", "crm")
MODEL_FIELD = re.compile(rf"\b({'|'.join(APP_LABELS)})\.([A-Z][A-Za-z0-9]*)\.([a-z_][a-z0-9_]*)\b")
NOT_COLUMNS = {"constraint", "unique", "primary", "check", "foreign", "exclude", "like"}


def _strip_comments(sql: str) -> str:
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.DOTALL)
    return re.sub(r"--[^\n]*", " ", sql)


def _split_top_level(body: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in body:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def seed_columns(text: str) -> dict[str, list[str]]:
    """``{table: [column, ...]}`` of every CREATE TABLE and ALTER TABLE ... ADD COLUMN."""
    sql = _strip_comments(text)
    tables: dict[str, list[str]] = {}
    for match in re.finditer(
        r"CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s*\(", sql, flags=re.IGNORECASE
    ):
        depth, index = 1, match.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(sql[index], 0)
            index += 1
        columns = tables.setdefault(match.group(1), [])
        for item in _split_top_level(sql[match.end() : index - 1]):
            name = item.split()[0].strip('"')
            if name.lower() not in NOT_COLUMNS:
                columns.append(name)
    for match in re.finditer(r"ALTER\s+TABLE\s+(\w+)([^;]*);", sql, flags=re.IGNORECASE):
        added = re.findall(r"ADD\s+COLUMN\s+(\w+)", match.group(2), flags=re.IGNORECASE)
        tables.setdefault(match.group(1), []).extend(added)
    return tables


def doc_sections() -> dict[str, str]:
    """The doc's text per ``## <seed file>`` heading."""
    sections: dict[str, str] = {}
    current = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"^##\s+`?([\w.]+\.txt)`?", line)
        if heading:
            current = heading.group(1)
            sections[current] = ""
        elif line.startswith("## "):
            current = None
        elif current:
            sections[current] += line + "\n"
    return sections


def _seed_files() -> list[Path]:
    if not SEEDS.is_dir():
        pytest.skip(f"seed folder {SEEDS} is absent: nothing to check the doc against")
    return sorted(SEEDS.glob("*.txt"))


def test_parser_reads_the_seed_sql() -> None:
    sample = """
    CREATE TABLE IF NOT EXISTS t (
      id UUID PRIMARY KEY, -- a, comment (with parens)
      price DECIMAL(10, 2) DEFAULT 0,
      kind TEXT CHECK (kind IN ('a', 'b')),
      UNIQUE (id, kind),
      CONSTRAINT c CHECK (price >= 0)
    );
    ALTER TABLE t
      ADD COLUMN extra TEXT,
      -- note
      ADD COLUMN more INTEGER;
    """
    assert seed_columns(sample) == {"t": ["id", "price", "kind", "extra", "more"]}


def test_every_seed_column_is_mapped_in_docs_schema() -> None:
    files = _seed_files()
    sections = doc_sections()
    missing, unexplained = [], []
    for path in files:
        section = sections.get(path.name, "")
        rows = {}
        for line in section.splitlines():
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if len(cells) >= 2:
                rows[cells[0].strip("`")] = cells[1]
        for table, columns in seed_columns(path.read_text()).items():
            for column in columns:
                key = f"{table}.{column}"
                if key not in rows:
                    missing.append(f"{path.name}: {key}")
                elif not (MODEL_FIELD.search(rows[key]) or rows[key].startswith("dropped:")):
                    unexplained.append(f"{path.name}: {key} -> {rows[key]!r}")
    assert missing == []
    assert unexplained == []


def test_every_model_field_named_in_the_doc_exists() -> None:
    unknown = []
    for app_label, model_name, field_name in set(MODEL_FIELD.findall(DOC.read_text())):
        try:
            model = apps.get_model(app_label, model_name)
        except LookupError:
            unknown.append(f"{app_label}.{model_name}")
            continue
        try:
            model._meta.get_field(field_name)
        except FieldDoesNotExist:
            unknown.append(f"{app_label}.{model_name}.{field_name}")
    assert sorted(unknown) == []
