"""A local catalog: the servers an air-gapped site (or a careful one) offers, in a JSON file it keeps itself.

The file is a JSON array whose items are ``server.json`` objects or registry list items (``{"server": ...,
"_meta": ...}``), so a page saved from a registry (``{"servers": [...]}``) is accepted as it is. It is the
operator's own file, so a bad one is their mistake to fix: every problem names the file and the entry's index, and
one bad entry never hides the good ones. It is read again only when it changes (its size and mtime).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .entries import RegistryDataError, ServerEntry, parse_server_json
from .source import StaticSource

MAX_CATALOG_BYTES = 64 << 20
MAX_CATALOG_ENTRIES = 40_000


@dataclasses.dataclass(frozen=True)
class CatalogRead:
    """What one catalog file gave: its entries, and a sentence per problem (file, index, field)."""

    entries: tuple[ServerEntry, ...] = ()
    problems: tuple[str, ...] = ()


def read_catalog(path: Path) -> CatalogRead:
    """Every readable entry of ``path``; problems name the file and the index of the entry at fault."""
    try:
        size = path.stat().st_size
        if size > MAX_CATALOG_BYTES:
            return CatalogRead(problems=(f"the catalog {path} is {size:,} bytes, over the bound of "
                                         f"{MAX_CATALOG_BYTES:,}; split it into several files",))  # fmt: skip
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return CatalogRead(problems=(f"the catalog {path} does not exist; fix MCP_BRIDGE_REGISTRY_CATALOG",))
    except OSError as exc:
        return CatalogRead(problems=(f"the catalog {path} cannot be read ({exc.strerror}); check its permissions",))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        where = f" at line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        return CatalogRead(problems=(f"the catalog {path} is not valid JSON{where}; fix it (a JSON array of "
                                     "server.json objects)",))  # fmt: skip
    if isinstance(document, dict) and isinstance(document.get("servers"), list):
        document = document["servers"]  # a registry's page, saved as it came
    if not isinstance(document, list):
        return CatalogRead(problems=(f"the catalog {path} is a JSON {type(document).__name__}, not an array; write "
                                     "[{...server.json...}, ...]",))  # fmt: skip
    entries: dict[tuple[str, str], ServerEntry] = {}
    problems: list[str] = []
    for index, item in enumerate(document[:MAX_CATALOG_ENTRIES]):
        try:
            entry = parse_server_json(item, f"catalog {path}")
        except RegistryDataError as exc:
            problems.append(f"the catalog {path}, entry [{index}]: {exc}")
            continue
        if (entry.name, entry.version) in entries:
            problems.append(f"the catalog {path}, entry [{index}]: {entry.name} {entry.version} is listed twice; "
                            "the first is used")  # fmt: skip
            continue
        entries[(entry.name, entry.version)] = entry
    if len(document) > MAX_CATALOG_ENTRIES:
        problems.append(f"the catalog {path} lists {len(document):,} entries; only the first "
                        f"{MAX_CATALOG_ENTRIES:,} are read")  # fmt: skip
    return CatalogRead(tuple(_latest_marked(list(entries.values()))), tuple(problems))


def _latest_marked(entries: list[ServerEntry]) -> list[ServerEntry]:
    """A catalog says nothing of which version is latest: the last listed of a name is."""
    last = {entry.name: index for index, entry in enumerate(entries)}
    return [dataclasses.replace(entry, is_latest=last[entry.name] == index) for index, entry in enumerate(entries)]


class Catalogs:
    """The catalog files, each read again when it changes; an ``EntrySource`` over all of them."""

    def __init__(self, paths: tuple[Path, ...]) -> None:
        self.paths = paths
        self._read: dict[Path, tuple[tuple[int, int], CatalogRead]] = {}

    def read(self) -> list[CatalogRead]:
        found = []
        for path in self.paths:
            try:
                info = path.stat()
                stamp = (info.st_size, info.st_mtime_ns)
            except OSError:
                stamp = (-1, -1)
            kept = self._read.get(path)
            if kept is None or kept[0] != stamp:
                kept = (stamp, read_catalog(path))
                self._read[path] = kept
            found.append(kept[1])
        return found

    def entries(self) -> list[ServerEntry]:
        return [entry for read in self.read() for entry in read.entries]

    def source(self) -> StaticSource:
        where = "the local catalog" + ("s " if len(self.paths) > 1 else " ") + ", ".join(map(str, self.paths))
        return StaticSource(self.entries(), where=where)
