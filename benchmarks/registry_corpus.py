"""The MCP Registry's seed data as the bridge reads it: what ``benchmarks/registry_search.py`` ranks.

``benchmarks/corpus/registry`` holds two files of the registry's own repository, as published (see its README):
``seed.json``, today's seed in the current ``server.json`` format (2025-12-11), and ``seed_2025_05_16.json``, the
registry's launch seed of 471 real servers, written in the API format of May 2025 (snake_case, ``registry_name``,
``version_detail``, ``transport_type``). The bridge reads only the current format, so the older entries are
rewritten field by field into it here (``modern``), changing no text; then every entry goes through the product's
own parser (``parse_server_json``), and what it refuses is reported with its reason, as a catalog would report it.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from mcp_codemode.upstream.registry.entries import RegistryDataError, ServerEntry, parse_server_json

REGISTRY_CORPUS = Path(__file__).resolve().parent / "corpus" / "registry"
FILES = ("seed.json", "seed_2025_05_16.json")  # newer first: a name listed in both is read from the newer
SCHEMA = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
REGISTRY_TYPES = {"docker": "oci"}  # the May 2025 names that the current schema calls otherwise


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The entries the bridge accepts, in file order, and one line per entry it refuses."""

    entries: tuple[ServerEntry, ...]
    refused: tuple[str, ...]
    listed: int  # entries in the files, accepted or not


def load_corpus(directory: Path = REGISTRY_CORPUS) -> Corpus:
    entries: list[ServerEntry] = []
    refused: list[str] = []
    listed = 0
    for name in FILES:
        document = json.loads((directory / name).read_text(encoding="utf-8"))
        for index, item in enumerate(document):
            listed += 1
            try:
                entries.append(parse_server_json(modern(item), f"{name}[{index}]"))
            except RegistryDataError as exc:
                refused.append(f"{name}[{index}]: {exc}")
    return Corpus(tuple(entries), tuple(refused), listed)


def modern(item: Any) -> Any:
    """A May 2025 entry in the current ``server.json`` shape (same texts, current field names); others unchanged."""
    if not isinstance(item, Mapping) or "version_detail" not in item:
        return item
    server: dict[str, Any] = {"$schema": SCHEMA, "name": item.get("name"), "description": item.get("description")}
    repository = item.get("repository")
    if isinstance(repository, Mapping) and repository.get("url"):
        server["repository"] = {"url": repository["url"], "source": repository.get("source", "")}
    detail = item.get("version_detail")
    server["version"] = detail.get("version") if isinstance(detail, Mapping) else None
    packages = [_package(package) for package in item.get("packages") or ()]
    if packages:
        server["packages"] = packages
    remotes = [{"type": remote.get("transport_type"), "url": remote.get("url")} for remote in item.get("remotes") or ()]
    if remotes:
        server["remotes"] = remotes
    return server


def _package(package: Mapping[str, Any]) -> dict[str, Any]:
    kind = package.get("registry_name")
    converted: dict[str, Any] = {
        "registryType": REGISTRY_TYPES.get(kind, kind) if isinstance(kind, str) else kind,
        "identifier": package.get("name"),
        "transport": {"type": "stdio"},  # the May 2025 format had no other for a package
    }
    if package.get("version"):
        converted["version"] = package["version"]
    arguments = [_renamed(argument) for argument in package.get("package_arguments") or ()]
    if arguments:
        converted["packageArguments"] = arguments
    variables = [_renamed(variable) for variable in package.get("environment_variables") or ()]
    if variables:
        converted["environmentVariables"] = variables
    return converted


_RENAMED = {"is_required": "isRequired", "is_secret": "isSecret", "value_hint": "valueHint"}


def _renamed(item: Mapping[str, Any]) -> dict[str, Any]:
    """An argument or environment variable: the same keys and values, in camelCase."""
    return {_RENAMED.get(key, key): value for key, value in item.items()}
