"""An agency's datasets for analysis (issue 30) and the table results the SQL tools produce.

A dataset's rows live in PostgreSQL, as Parquet bytes in its row (docs/decisions/0011): under
row-level security like every tenant table, gone with the agency by its foreign key, and within
one transaction with the schema that describes them. A dataset over CRM entities holds no bytes:
its query is run under the agency when a tool reads it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from agents.models import Execution
from core.models import AgencyOwnedModel

# A dataset's name is its SQL table name (``datasets.<name>``): lower case, no quoting needed.
DATASET_NAME_REGEX = r"^[a-z][a-z0-9_]{0,62}$"


class DatasetSource(models.TextChoices):
    UPLOAD = "upload", "Uploaded file"
    CRM_QUERY = "crm_query", "Query over CRM entities"


class DatasetFormat(models.TextChoices):
    CSV = "csv", "CSV"
    XLSX = "xlsx", "Excel (XLSX)"
    PARQUET = "parquet", "Parquet"
    CRM = "crm", "CRM query"


class Dataset(AgencyOwnedModel):
    """A table an agency's agents may query with ``execute_sql`` / ``execute_query_plan``.

    ``columns`` is the inferred schema, one dict per column in order: ``name``, ``type`` (DuckDB's),
    ``samples`` (up to 5 distinct values, as text) and ``description`` (staff write it: it helps
    the model map a request's words to columns).
    """

    name = models.CharField(max_length=63)
    title = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=16, choices=DatasetSource.choices)
    file_format = models.CharField("format", max_length=16, choices=DatasetFormat.choices)
    original_name = models.CharField("file name", max_length=255, blank=True)
    size_bytes = models.PositiveBigIntegerField("uploaded size (bytes)", default=0)
    row_count = models.PositiveBigIntegerField(default=0)
    columns = models.JSONField(default=list, blank=True)
    # The rows as Parquet (uploads); empty for a CRM query. Read only by the tools and downloads.
    data = models.BinaryField(blank=True, default=b"")
    # A CRM query: {"entity_type", "filters", "fields"} (tools/builtin/_entities checks it).
    query = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "analysis dataset"  # evals has "datasets" (of test cases)
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["agency", "name"], name="datasets_dataset_name_unique"),
            models.CheckConstraint(
                condition=models.Q(name__regex=DATASET_NAME_REGEX),
                name="datasets_dataset_name_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(source__in=DatasetSource.values),
                name="datasets_dataset_source_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(file_format__in=DatasetFormat.values),
                name="datasets_dataset_file_format_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class DatasetResult(AgencyOwnedModel):
    """A table artefact: the result of one ``execute_sql`` / ``execute_query_plan`` call.

    The tool's result shows its first rows inline; the whole result (up to the row limit) is kept
    here as CSV to download. It goes with its run (retention, agency deletion).
    """

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="+")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=64)
    sql = models.TextField()
    columns = models.JSONField(default=list)
    row_count = models.PositiveIntegerField(default=0)
    truncated = models.BooleanField(default=False)
    csv = models.BinaryField(default=b"")

    class Meta:
        verbose_name = "table result"
        ordering = ["created_at"]
        indexes = [models.Index(fields=["execution", "created_at"])]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.row_count} rows)"


class DatasetChart(AgencyOwnedModel):
    """A chart artefact: one PNG an ``execute_python`` script left open (matplotlib), shown on
    the run page. The model is told its id, never given its bytes; it goes with its run
    (retention, agency deletion) like a table result."""

    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="+")
    tool_call_id = models.CharField(max_length=200)
    tool_name = models.CharField(max_length=64)
    position = models.PositiveSmallIntegerField(default=0)  # its order among the call's charts
    width = models.PositiveIntegerField(default=0)
    height = models.PositiveIntegerField(default=0)
    size_bytes = models.PositiveIntegerField(default=0)
    png = models.BinaryField(default=b"")

    class Meta:
        verbose_name = "chart"
        ordering = ["created_at", "position"]
        indexes = [models.Index(fields=["execution", "created_at"])]

    def __str__(self) -> str:
        return f"{self.tool_name} chart {self.position + 1} ({self.width}x{self.height})"
