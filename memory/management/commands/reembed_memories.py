"""``manage.py reembed_memories --agency <id|slug> | --all``: embed an agency's memories (and
episodes) again with its current embedding model, after ``Agency.embedding_provider`` or
``embedding_model`` changed. Searches compare only vectors of the current model, so until this
has run the other memories are found by their words alone.

Resumable: each batch is its own transaction, and a row already embedded by the current model is
never selected again, so an interrupted run (Ctrl-C, a deploy) continues where it stopped.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from core import tenancy
from core.models import Agency
from memory.embeddings import EmbeddingError, clear_config_cache, config_for
from memory.embeddings.backfill import EPISODES, MEMORIES, count, embed_batch, stale


class Command(BaseCommand):
    help = (
        "Embed an agency's memories and episodes again with its current embedding model (those "
        "of another model, or none). Resumable: run it again to continue."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--agency", help="the agency's id or slug")
        which.add_argument("--all", action="store_true", help="every agency")
        parser.add_argument(
            "--batch-size",
            type=int,
            default=settings.AGENTDESK_EMBEDDING_BATCH_SIZE,
            help="rows per model call and per transaction (default: %(default)s)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["batch_size"] < 1:
            raise CommandError("--batch-size must be at least 1")
        agencies = self._agencies(options["agency"])
        clear_config_cache()  # the agency's choice as it is now, not as this process cached it
        self.stdout.ending = ""  # rich writes whole lines and its own control sequences
        console = Console(file=self.stdout)  # type: ignore[arg-type]
        total = 0
        for agency_id, name in agencies:
            total += self._agency(console, agency_id, name, options["batch_size"])
        console.print(f"Done: {total} embedded again.")

    def _agencies(self, wanted: str | None) -> list[tuple[uuid.UUID, str]]:
        with tenancy.platform_context():
            agencies = Agency.objects.order_by("name")
            if wanted is not None:
                try:
                    by_id = uuid.UUID(wanted)
                except ValueError:
                    agencies = agencies.filter(slug=wanted)
                else:
                    agencies = agencies.filter(pk=by_id)
            found = list(agencies.values_list("pk", "name"))
        if not found and wanted is not None:
            raise CommandError(f"No agency with id or slug {wanted!r}")
        return found

    def _agency(self, console: Console, agency_id: uuid.UUID, name: str, size: int) -> int:
        try:
            config = config_for(agency_id)
        except EmbeddingError as exc:
            raise CommandError(f"{name}: {exc}") from exc
        where = stale(config.name)
        todo = {
            kind: count(kind, agency_id=agency_id, where=where) for kind in (MEMORIES, EPISODES)
        }
        console.print(
            f"{name}: {config.name}: {todo[MEMORIES]} memories, {todo[EPISODES]} episodes"
        )
        written = 0
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console) as progress:
            for kind, remaining in todo.items():
                if not remaining:
                    continue
                task = progress.add_task(f"  {kind.label}", total=remaining)
                after = None
                while True:
                    try:
                        batch = embed_batch(
                            kind,
                            agency_id=agency_id,
                            config=config,
                            where=where,
                            limit=size,
                            after=after,
                        )
                    except EmbeddingError as exc:
                        raise CommandError(
                            f"{name}: {exc} ({written} embedded again; run the command again "
                            "to continue)"
                        ) from exc
                    written += batch.written
                    progress.advance(task, batch.selected)
                    if not batch.more:
                        break
                    after = batch.last_pk
        return written
