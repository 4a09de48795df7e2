"""The data analyst's play over the agency's datasets (datasets/: ``list_datasets``,
``get_dataset_schema``, ``execute_sql``, ``execute_python``): the datasets, the first one's
schema, then one query ranking its rows by the measure asked for (a person's answer to the
understanding's question says which: lead score, deals won or deal value), a bar chart of the
top rows when it may run Python, and the top rows in words."""

from __future__ import annotations

from devkit.fake_server.demo.situation import Action, Play, Situation

# The measure a request (or a person's answer) names: its words -> the column.
MEASURES = (
    ("lead score", "lead_score"),
    ("deals won", "deals_won"),
    ("deal value", "deal_value"),
    ("value", "deal_value"),
    ("won", "deals_won"),
    ("score", "lead_score"),
)


def _dataset(s: Situation) -> dict[str, object] | None:
    datasets = (s.output("list_datasets") or {}).get("datasets") or []
    first = datasets[0] if datasets and isinstance(datasets[0], dict) else None
    return dict(first) if first else None


def _columns(s: Situation) -> list[str]:
    schema = s.output("get_dataset_schema") or {}
    return [str(c.get("name")) for c in schema.get("columns") or [] if isinstance(c, dict)]


def _measure(s: Situation) -> str:
    # A person's answer comes as: A person answered the question "<question>": <answer>.
    answer = s.said.rpartition('": ')[2] if s.said != s.text else ""
    columns = _columns(s)
    for said in (answer.lower(), s.text.lower()):
        for words, column in MEASURES:
            if words in said and column in columns:
                return column
    numeric = [c for c in columns if c in {column for _, column in MEASURES}]
    return numeric[0] if numeric else (columns[-1] if columns else "1")


def _list(s: Situation) -> Action:
    return Action("list_datasets", {}, "First, which datasets the agency has. ")


def _schema(s: Situation) -> Action | None:
    dataset = _dataset(s)
    if dataset is None:
        return None
    return Action(
        "get_dataset_schema",
        {"dataset": dataset["name"]},
        f"Then the columns of {dataset['name']}. ",
    )


def _query(s: Situation) -> Action | None:
    dataset, columns = _dataset(s), _columns(s)
    if dataset is None or not columns:
        return None
    measure, label = _measure(s), columns[0]
    sql = (
        f"SELECT {label}, {measure} FROM {dataset['table']} "  # noqa: S608 - a demo's own query
        f"ORDER BY {measure} DESC LIMIT 5"
    )
    return Action("execute_sql", {"sql": sql}, f"Now the top five by {measure}. ")


def _chart(s: Situation) -> Action | None:
    """The same top five as a bar chart (execute_python, matplotlib): a chart artefact."""
    dataset, columns = _dataset(s), _columns(s)
    if dataset is None or not columns or s.output("execute_sql") is None:
        return None
    measure, label = _measure(s), columns[0]
    code = (
        "import pandas as pd\n"
        "import matplotlib.pyplot as plt\n\n"
        f"df = pd.read_csv('/data/{dataset['name']}.csv')\n"
        f"top = df.sort_values('{measure}', ascending=False).head(5)\n"
        "fig, ax = plt.subplots(figsize=(7, 3.2))\n"
        f"ax.barh(top['{label}'], top['{measure}'], color='#4f46e5')\n"
        "ax.invert_yaxis()\n"
        f"ax.set_xlabel('{measure}')\n"
        f"ax.set_title('Top 5 by {measure}')\n"
        "fig.tight_layout()\n"
    )
    return Action(
        "execute_python",
        {"code": code, "datasets": [dataset["name"]]},
        "And a bar chart of them for the run page. ",
    )


def _summary(s: Situation) -> str:
    result = s.output("execute_sql") or {}
    rows = result.get("rows") or []
    if not rows:
        errors = "; ".join(s.errors()) or "no dataset to read"
        return f"(demo model: scripted, no AI) I could not rank anything: {errors}."
    measure = _measure(s)
    lines = [
        ", ".join(f"{value}" for value in (row.values() if isinstance(row, dict) else row))
        for row in rows[:5]
    ]
    drawn = (s.output("execute_python") or {}).get("charts")
    return (
        f"(demo model: scripted, no AI) The top {len(lines)} by {measure}: "
        + "; ".join(lines)
        + (
            ". The whole table and a bar chart are on the run page."
            if drawn
            else ". The whole table is on the run page."
        )
    )


DATASET_ANALYST = Play("dataset_analyst", (_list, _schema, _query, _chart), _summary)
