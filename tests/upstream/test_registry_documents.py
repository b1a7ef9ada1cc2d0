"""What find_servers() ranks of a registry entry: its distinctive words, not the ones every entry carries."""

from __future__ import annotations

from mcp_codemode.upstream.registry.documents import searchable, server_document
from mcp_codemode.upstream.registry.entries import PackageRun, RemoteRun, ServerEntry
from mcp_codemode.upstream.tools.ranking import Ranker


def _entry(name: str, description: str = "", **fields: object) -> ServerEntry:
    return ServerEntry(name=name, version="1.0.0", description=description, source="test", **fields)  # type: ignore[arg-type]


def test_a_name_loses_the_words_every_registry_name_has_and_keeps_its_publisher_apart() -> None:
    document = server_document(_entry("io.github.flux159/mcp-server-kubernetes"))
    assert (document.name, document.group) == ("kubernetes", "flux159")
    assert server_document(_entry("io.github.domdomegg/TimeMcpServer")).name == "Time"
    # A name that is nothing but "mcp" is its publisher's server.
    assert server_document(_entry("io.github.semgrep/mcp")).name == "semgrep"
    assert server_document(_entry("com.example.tools/mcp")).group == "example tools"


def test_packages_add_their_own_names_without_hosts_tags_versions_or_urls() -> None:
    packages = (
        PackageRun("npm", "@acme/mcp-server-kubernetes", "1.0.0"),  # the same words as the name: nothing new
        PackageRun("oci", "docker.io/acme/cluster-tools-mcp:1.7.2", "1.7.2"),
        PackageRun("mcpb", "https://github.com/acme/k/releases/download/v1.7.2/helm-charts.mcpb", "sha256:0"),
        PackageRun("pypi", "kube-ops@2", "2"),
    )
    document = server_document(_entry("io.github.acme/kubernetes-mcp", packages=packages))
    assert document.title == "cluster tools helm charts kube ops"


def test_remote_hosts_say_which_product_a_remote_server_is() -> None:
    remotes = (RemoteRun("sse", "https://observability.mcp.cloudflare.com/sse"),
               RemoteRun("streamable-http", "https://mcp.cyphrex.io/mcp"))  # fmt: skip
    document = server_document(_entry("com.example/remote", remotes=remotes))
    assert document.parameters == (("observability cloudflare", ""), ("cyphrex", ""))


def test_a_server_is_not_found_for_the_registry_its_package_happens_to_be_published_on() -> None:
    weather = _entry("io.github.a/weather-mcp", "Forecasts for any city.",
                     packages=(PackageRun("oci", "docker.io/a/weather-mcp:1.0.0", "1.0.0"),))  # fmt: skip
    containers = _entry("io.github.b/containers", "Start, stop and inspect Docker containers.")
    ranker = Ranker([server_document(weather), server_document(containers)])
    assert [index for _, index in ranker.search("docker")] == [1]


def test_searchable_keeps_the_first_of_each_name_and_no_deleted_one() -> None:
    first, again = _entry("io.github.a/x", "first"), _entry("io.github.a/x", "again")
    gone = _entry("io.github.a/y", status="deleted")
    seen = {"io.github.a/z"}
    assert searchable([first, again, gone, _entry("io.github.a/z")], seen) == [first]
    assert seen == {"io.github.a/x", "io.github.a/z"}
