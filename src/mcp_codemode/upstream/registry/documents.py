"""What of a registry entry ``find_servers()`` searches: the ranker's ``Document`` for one server.

The ranker (``tools/ranking.py``) is shared with the tool search; what is registry-specific is which of an entry's
fields land in which of its fields. Kept apart from the finder so that the benchmark of registry search
(``benchmarks/registry_search.py``) ranks exactly what the product ranks, without a network.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..tools.ranking import Document
from .entries import ServerEntry


def searchable(entries: Iterable[ServerEntry], seen: set[str]) -> list[ServerEntry]:
    """The entries worth ranking: the first of each name (``seen`` collects names across sources), none deleted."""
    found = []
    for entry in entries:
        if entry.name in seen or entry.status == "deleted":
            continue
        seen.add(entry.name)
        found.append(entry)
    return found


def server_document(entry: ServerEntry) -> Document:
    identifiers = " ".join(package.identifier for package in entry.packages)
    needs = tuple((need.name, need.description) for package in entry.packages for need in package.environment)
    namespace, _, short = entry.name.rpartition("/")
    return Document(
        name=short,
        description=entry.description,
        title=f"{entry.title} {identifiers}".strip(),
        parameters=needs,
        group=namespace,
    )
