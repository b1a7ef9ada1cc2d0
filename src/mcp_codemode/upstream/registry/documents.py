"""What of a registry entry ``find_servers()`` searches: the ranker's ``Document`` for one server.

The ranker (``tools/ranking.py``) is shared with the tool search; what is registry-specific is which of an entry's
fields land in which of its fields. Kept apart from the finder so that the benchmark of registry search
(``benchmarks/registry_search.py``) ranks exactly what the product ranks, without a network.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Iterable

from ..tools.ranking import Document
from .entries import PackageRun, ServerEntry

# Words every server's name says ("mcp-server-kubernetes", "TimeMcpServer"): they tell servers apart no more than
# "the" does, and in a name they dilute the words that do, so a query naming only the product covers part of it.
_BOILERPLATE = re.compile(r"mcp|(?<![a-z])servers?(?![a-z])", re.IGNORECASE)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PARTS = re.compile(r"[-_.\s]+")
# Labels of a reverse-DNS namespace or a host name that name no publisher or product.
_NOT_A_NAME = frozenset({"io", "com", "org", "net", "ai", "dev", "app", "co", "github", "gitlab", "mcp", "www", "api"})


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
    """The server's distinctive name words as its name; its title and its packages' own names as its title; its
    description; the variables it needs and the hosts it is reached at as its parameters; its publisher as its group.

    A registry name is a namespace and a server name, and both carry words every entry has: ``io.github.`` and
    ``mcp-server-``. Left in, they make a query that names just the product ("kubernetes") cover a third of the
    name, and a package identifier brings a registry host, an image tag or a whole download URL into the name.
    """
    namespace, _, short = entry.name.rpartition("/")
    publisher = " ".join(label for label in namespace.split(".") if label.lower() not in _NOT_A_NAME) or namespace
    name = _distinctive(short) or publisher  # "io.github.semgrep/mcp" is Semgrep's server
    seen = set(name.lower().split())
    titles = [entry.title] if entry.title else []
    for package in entry.packages:
        words = _distinctive(_package_name(package))
        if words and not set(words.lower().split()) <= seen:
            seen |= set(words.lower().split())
            titles.append(words)
    hosts = [_host_words(remote.url) for remote in entry.remotes]
    needs = tuple((need.name, need.description) for package in entry.packages for need in package.environment)
    return Document(
        name=name,
        description=entry.description,
        title=" ".join(titles),
        parameters=needs + tuple((host, "") for host in dict.fromkeys(hosts) if host),
        group=publisher,
    )


def _distinctive(name: str) -> str:
    """A server's or package's name without what every one says: ``mcp-server-kubernetes`` → ``kubernetes``."""
    return " ".join(part for part in _PARTS.split(_BOILERPLATE.sub(" ", _CAMEL.sub(" ", name))) if part)


def _package_name(package: PackageRun) -> str:
    """The package's own name: no npm scope, registry host, image tag or digest, version, or file extension."""
    identifier = package.identifier
    if package.registry_type == "mcpb":
        identifier = urllib.parse.urlsplit(identifier).path
    last = identifier.rstrip("/").rsplit("/", 1)[-1]
    last = last.split("@", 1)[0].split(":", 1)[0]
    return re.sub(r"\.(mcpb|tgz|zip|tar\.gz|whl)$", "", last, flags=re.IGNORECASE)


def _host_words(url: str) -> str:
    host = urllib.parse.urlsplit(url).hostname or ""
    labels = host.split(".")[:-1]  # the top-level domain names nothing
    return " ".join(label for label in labels if label not in _NOT_A_NAME and not label.isdigit())
