"""The settings of find_servers(): which registries, the local catalogs, the cache's life and the wait, and the
errors a wrong value gets (the variable, what was expected, an example)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.registry_settings import OFFICIAL_REGISTRY
from mcp_codemode.settings import Settings


def test_the_official_registry_is_asked_unless_another_list_or_off_is_given() -> None:
    assert Settings.load(env={}).registries == (OFFICIAL_REGISTRY,)
    for off in ("off", "", " none "):
        assert Settings.load(env={"MCP_BRIDGE_REGISTRIES": off}).registries == ()
    both = Settings.load(env={"MCP_BRIDGE_REGISTRIES": "https://mcp.example.org/, http://127.0.0.1:8080,"
                                                       "https://mcp.example.org"})  # fmt: skip
    assert both.registries == ("https://mcp.example.org", "http://127.0.0.1:8080")  # in order, once each
    assert Settings.load(env={"MCP_BRIDGE_REGISTRIES": "http://[::1]:9/r"}).registries == ("http://[::1]:9/r",)


@pytest.mark.parametrize(
    "value",
    [
        "http://registry.example.org",  # anyone between could rewrite an entry a person then consents to
        "ftp://registry.example.org",
        "https://registry.example.org/?q=1",
        "https://user:secret@registry.example.org",
        "registry.example.org",
    ],
)
def test_a_registry_that_is_not_a_plain_https_address_is_refused_with_what_is_expected(value: str) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.load(env={"MCP_BRIDGE_REGISTRIES": value})
    message = str(refused.value)
    assert message.startswith("MCP_BRIDGE_REGISTRIES=") and "https://" in message and "for example" in message


def test_catalog_paths_are_absolute_and_the_numbers_bounded(tmp_path: Path) -> None:
    catalog = tmp_path / "catalog.json"
    other = tmp_path / "more.json"
    loaded = Settings.load(env={"MCP_BRIDGE_REGISTRY_CATALOG": f"{catalog}:{other}", "MCP_BRIDGE_REGISTRY_TTL": "0",
                                "MCP_BRIDGE_REGISTRY_TIMEOUT": "2.5"})  # fmt: skip
    assert (loaded.registry_catalog, loaded.registry_ttl, loaded.registry_timeout) == ((catalog, other), 0.0, 2.5)
    for variable, value, expected in (
        ("MCP_BRIDGE_REGISTRY_CATALOG", "catalog.json", "absolute paths of local catalog files"),
        ("MCP_BRIDGE_REGISTRY_TTL", "-1", "0 to 2592000"),
        ("MCP_BRIDGE_REGISTRY_TIMEOUT", "0.5", "1 to 300"),
    ):
        with pytest.raises(SettingsError, match=f"^{variable}='{value}' is not valid: expected .*{expected}"):
            Settings.load(env={variable: value})


def test_the_settings_file_takes_lists(tmp_path: Path) -> None:
    file = tmp_path / "settings.toml"
    file.write_text(f'registries = ["https://a.example", "{OFFICIAL_REGISTRY}"]\n'
                    f'registry_catalog = ["{tmp_path}/catalog.json"]\n')  # fmt: skip
    loaded = Settings.load(env={}, settings_file=file)
    assert loaded.registries == ("https://a.example", OFFICIAL_REGISTRY)
    assert loaded.registry_catalog == (tmp_path / "catalog.json",)
