"""Charts an ``execute_python`` script makes (matplotlib figures it left open, saved as PNG by the
sandbox's runner) kept as artefacts of the tool call (datasets.models.DatasetChart) and shown on
the run page.

The bytes come out of the sandbox, where the script could have replaced what the runner saves: a
chart is kept only if it is a PNG (its signature and header read here, its size within
AGENTDESK_DATASET_CHART_MAX_BYTES); anything else is dropped and the model told how many and why.
The image is served only as ``image/png`` with ``nosniff``, so a forged file is never read as a
page."""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

from django.conf import settings

from datasets import services

SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_SIDE = 20_000  # pixels: more is no chart a person reads


@dataclass(frozen=True)
class Png:
    width: int
    height: int


def png_header(data: bytes) -> Png | None:
    """The image's size if ``data`` starts as a PNG does (signature, then an IHDR chunk)."""
    if len(data) < 24 or not data.startswith(SIGNATURE) or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    if not (0 < width <= MAX_SIDE and 0 < height <= MAX_SIDE):
        return None
    return Png(width=width, height=height)


@dataclass(frozen=True)
class Kept:
    ids: list[str]
    dropped: str  # why some were not kept, in words for the model ("" when all were)


def charts_keep(
    *,
    agency_id: uuid.UUID,
    execution_id: uuid.UUID,
    tool_call_id: str,
    tool_name: str,
    charts: list[bytes],
) -> Kept:
    """Store each valid chart of one tool call (inside the call's transaction, as its table)."""
    limit = settings.AGENTDESK_DATASET_CHART_MAX_BYTES
    ids: list[str] = []
    too_large = not_png = 0
    for position, data in enumerate(charts):
        header = png_header(data)
        if header is None:
            not_png += 1
            continue
        if len(data) > limit:
            too_large += 1
            continue
        saved = services.chart_record(
            agency_id=agency_id,
            execution_id=execution_id,
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            position=position,
            width=header.width,
            height=header.height,
            png=data,
        )
        ids.append(str(saved.id))
    reasons = [
        *([f"{too_large} larger than {limit} bytes"] if too_large else []),
        *([f"{not_png} not a PNG image"] if not_png else []),
    ]
    return Kept(ids=ids, dropped=", ".join(reasons) and f"not kept: {', '.join(reasons)}")
