"""docs/kubernetes.md says what the code and manifests do: its permission table, its settings, the names it gives.

Why a test: the page is what an operator reviews before granting the face a Role, and prose drifts from code one
feature at a time (issue 32 found a Role the docs called complete that failed the first exec). Each check reads the
page and compares it with the one source the code uses, so a change to either side without the other fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from mcp_codemode.cluster import leases, naming
from mcp_codemode.cluster.permissions import PERMISSIONS
from mcp_codemode.settings import Settings
from mcp_codemode.settings_fields import FIELDS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "kubernetes.md"
KUBE_FIELDS = ("kube_", "peer_", "replica", "session_lease")  # the settings only this backend and replicas read


def _section(text: str, title: str) -> list[str]:
    """The lines of the ``## title`` section, up to the next section of the same level."""
    lines = text.splitlines()
    start = lines.index(f"## {title}") + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return lines[start:end]


def _table_rows(lines: list[str]) -> list[list[str]]:
    """The body rows of the first Markdown table in ``lines``, as stripped cells."""
    rows = [line for line in lines if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def _documented_permissions() -> set[tuple[str, str, str]]:
    """(API group, resource as a Role names it, verb) for every verb of the page's table of what the face may do."""
    found: set[tuple[str, str, str]] = set()
    what = group = ""
    for first, verbs, _why in _table_rows(_section(PAGE.read_text(), "What the face may do")):
        if first:
            match = re.fullmatch(r"`([a-z/]+)` \((?:`([a-z0-9.-]+)`|core)\)", first)
            assert match, f"a resource cell the test cannot read: {first!r}"
            what, group = match[1], match[2] or ""
        found.update((group, what, verb) for verb in re.findall(r"`([a-z]+)`", verbs))
    return found


def test_the_permission_table_lists_exactly_the_verbs_the_code_uses() -> None:
    used = {(p.group, p.what, p.verb) for p in PERMISSIONS}
    documented = _documented_permissions()
    assert documented == used, f"documented, not used: {documented - used}; used, not documented: {used - documented}"


def test_the_settings_table_names_every_backend_setting_with_its_default() -> None:
    rows = _table_rows(_section(PAGE.read_text(), "Settings"))
    documented = {re.sub(r"`", "", row[0]): re.sub(r"`", "", row[1]) for row in rows}
    by_env = {field.env: field for field in FIELDS}
    unknown = set(documented) - set(by_env)
    assert not unknown, f"the page documents settings that do not exist: {sorted(unknown)}"
    backend = {f.env for f in FIELDS if f.name.startswith(KUBE_FIELDS)}
    assert backend <= set(documented), f"backend settings missing from the page: {sorted(backend - set(documented))}"
    defaults = Settings()
    for env, shown in documented.items():
        value = getattr(defaults, by_env[env].name)
        if isinstance(value, bool) or not isinstance(value, (int, float, str)) or shown in ("empty", "the hostname"):
            continue
        if isinstance(value, (int, float)):
            assert float(shown) == value, f"{env}: the page says {shown}, the default is {value}"
        else:
            assert shown == value, f"{env}: the page says {shown!r}, the default is {value!r}"


def test_every_name_the_page_gives_objects_is_one_the_code_writes() -> None:
    """Labels, annotations and Lease names an operator would select or grep for."""
    text = PAGE.read_text() + (ROOT / "deploy" / "kubernetes" / "README.md").read_text()
    written = {
        naming.MANAGED_BY, naming.PRINCIPAL_LABEL, naming.SESSION_LABEL, naming.OWNER_ANNOTATION,
        naming.POD_NAME_ANNOTATION, leases.PEER_URL_ANNOTATION, leases.PEER_URL_SIGNATURE_ANNOTATION,
        leases.HANDED_OVER_ANNOTATION,
    }  # fmt: skip
    manifests = "".join(p.read_text() for p in (ROOT / "deploy" / "kubernetes").rglob("*.yaml"))
    for name in set(re.findall(r"\b(?:mcp-codemode\.dev|agents\.x-k8s\.io)/[a-z][a-z-]*[a-z]\b", text)):
        assert name in written or name in manifests, f"the docs name {name!r}, which nothing writes"
    assert f"`{leases.REPLICA_LEASE_PREFIX}<hash of its name>`" in text
    assert f"`{naming.MANAGED_BY}: {naming.MANAGER}`" in text
