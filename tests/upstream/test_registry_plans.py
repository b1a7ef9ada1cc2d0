"""From a registry entry to a launch plan, the store of added servers, and the setting that allows adding."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.adding_settings import AddPolicy, add_policy
from mcp_codemode.errors import SettingsError
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.config.secrets import SecretError
from mcp_codemode.upstream.registry import installs
from mcp_codemode.upstream.registry.added import AddedServer, AddedStore, AddedStoreError, default_name, owner_tag
from mcp_codemode.upstream.registry.entries import parse_server_json
from mcp_codemode.upstream.registry.installs import folder_of
from mcp_codemode.upstream.registry.plans import CannotAdd, LaunchPlan, plan_for

EVERYTHING: dict[str, Any] = {
    "name": "io.github.modelcontextprotocol/server-everything",
    "description": "Exercises every MCP feature.",
    "version": "2026.8.31",
    "packages": [
        {"registryType": "oci", "identifier": "docker.io/mcp/everything:1", "version": "1",
         "transport": {"type": "stdio"}},
        {"registryType": "npm", "identifier": "@modelcontextprotocol/server-everything", "version": "2026.8.31",
         "runtimeHint": "npx", "transport": {"type": "stdio"},
         "packageArguments": [{"type": "positional", "value": "stdio"}],
         "environmentVariables": [
             {"name": "EVERYTHING_TOKEN", "isSecret": True, "isRequired": True, "description": "a token"},
             {"name": "LOG_LEVEL", "default": "info"},
             {"name": "OPTIONAL_THING"},
         ]},
    ],
}  # fmt: skip
TIME: dict[str, Any] = {
    "name": "io.github.modelcontextprotocol/time",
    "description": "Time and timezones.",
    "version": "2026.10.19",
    "packages": [
        {"registryType": "pypi", "identifier": "mcp-server-time", "version": "2026.10.19", "runtimeHint": "uvx",
         "transport": {"type": "stdio"},
         "packageArguments": [{"type": "named", "name": "--local-timezone", "value": "UTC"}]},
    ],
}  # fmt: skip
REMOTE: dict[str, Any] = {
    "name": "com.example/weather",
    "description": "Weather.",
    "version": "1.0.0",
    "remotes": [{"type": "streamable-http", "url": "https://weather.example.com/mcp",
                 "headers": [{"name": "Authorization", "isSecret": True, "isRequired": True},
                             {"name": "X-Units", "value": "metric"}]}],
}  # fmt: skip


def entry(data: dict[str, Any]) -> Any:
    return parse_server_json(data, "https://registry.example")


def test_an_npm_entry_is_planned_pinned_with_its_fixed_values_and_only_the_names_of_its_secrets() -> None:
    plan = plan_for(entry(EVERYTHING), ["npm", "pypi"])
    assert (plan.kind, plan.package, plan.version) == ("npm", "@modelcontextprotocol/server-everything", "2026.8.31")
    assert plan.arguments == ("stdio",)
    assert plan.env == (("LOG_LEVEL", "info"),)  # OPTIONAL_THING has no value and is not required: left out
    assert plan.secrets == ("EVERYTHING_TOKEN",)
    assert "oci" not in json.dumps(plan.as_json())  # the container image was passed over, the npm package taken


def test_a_pypi_entry_and_a_remote_entry_are_planned() -> None:
    plan = plan_for(entry(TIME), ["pypi"])
    assert (plan.kind, plan.package, plan.version, plan.arguments) == (
        "pypi", "mcp-server-time", "2026.10.19", ("--local-timezone", "UTC"))  # fmt: skip
    remote = plan_for(entry(REMOTE), [])
    assert (remote.kind, remote.transport, remote.url) == (
        "remote",
        "streamable-http",
        "https://weather.example.com/mcp",
    )
    assert remote.headers == (("X-Units", "metric"),) and remote.secrets == ("Authorization",)


@pytest.mark.parametrize(
    ("package", "why"),
    [
        ({"registryType": "oci", "identifier": "docker.io/x/y:1", "version": "1"}, "container image"),
        ({"registryType": "nuget", "identifier": "X.Y", "version": "1.0.0"}, "does not install"),
        ({"registryType": "mcpb", "identifier": "https://x.example/b.mcpb", "version": "1.0.0"}, "does not install"),
        ({"registryType": "npm", "identifier": "x-server", "version": "1.0.0", "transport": {"type": "sse"}},
         "stdio only"),
        ({"registryType": "npm", "identifier": "x-server", "version": "1.0.0",
          "registryBaseUrl": "https://npm.evil.example"}, "not the public one"),
        ({"registryType": "npm", "identifier": "x-server", "version": "1.0.0",
          "packageArguments": [{"type": "positional", "valueHint": "path"}]}, "would have to supply"),
        ({"registryType": "npm", "identifier": "x-server", "version": "1.0.0",
          "environmentVariables": [{"name": "ROOT", "isRequired": True}]}, "needs a value"),
        ({"registryType": "npm", "identifier": "X Server;rm -rf", "version": "1.0.0"}, "not a valid npm"),
        ({"registryType": "pypi", "identifier": "ok", "version": "1.0.0"}, "needs a Python"),
    ],
)  # fmt: skip
def test_what_cannot_run_here_is_refused_saying_why(package: dict[str, Any], why: str) -> None:
    data = {"name": "com.example/x", "description": "", "version": "1.0.0", "packages": [package]}
    with pytest.raises(CannotAdd, match=why) as caught:
        plan_for(entry(data), ["npm"])
    assert "com.example/x" in str(caught.value) and "pick another server" in str(caught.value)


def test_a_deprecated_entry_is_refused() -> None:
    data = {"server": TIME, "_meta": {"io.modelcontextprotocol.registry/official": {"status": "deprecated"}}}
    with pytest.raises(CannotAdd, match="deprecated"):
        plan_for(parse_server_json(data, "r"), ["pypi"])


def test_the_digest_binds_every_field_and_a_plan_reads_back_as_it_was() -> None:
    plan = plan_for(entry(EVERYTHING), ["npm"])
    assert LaunchPlan.from_json(json.loads(json.dumps(plan.as_json()))) == plan
    for changed in (
        {"version": "2026.8.30"}, {"arguments": ("sse",)}, {"package": "@modelcontextprotocol/server-everythinq"},
        {"env": ()}, {"secrets": ()}, {"entry": "io.github.modelcontextprotocol/server-everythinq"},
    ):  # fmt: skip
        assert LaunchPlan(**{**plan.__dict__, **changed}).digest() != plan.digest(), changed
    with pytest.raises(CannotAdd):
        LaunchPlan.from_json({**plan.as_json(), "command": "sh"})  # a field no plan has: a hand-edited file


def test_packages_are_installed_in_a_folder_of_their_own_per_version() -> None:
    npm, pypi = plan_for(entry(EVERYTHING), ["npm"]), plan_for(entry(TIME), ["pypi"])
    assert folder_of(npm, Path("/s")).parent == Path("/s/npm")
    assert folder_of(npm, Path("/s")).name.startswith("@modelcontextprotocol_server-everything@2026.8.31-")
    assert folder_of(pypi, Path("/s")).name.startswith("mcp-server-time==2026.10.19-")
    # Names that fold together once made safe for a path still get folders of their own: an installed folder is used
    # as it is, so a shared one would start another package than the one the person consented to.
    folded = [("@a_b/c", "npm"), ("@a/b_c", "npm"), ("a~b", "npm"), ("a_b", "npm"), ("A.b", "pypi"), ("A_b", "pypi")]
    folders = {folder_of(LaunchPlan("x/y", "1", "s", kind, package=name, version="1.0.0"), Path("/s"))  # type: ignore[arg-type]
               for name, kind in folded}  # fmt: skip
    assert len(folders) == len(folded)


# ------------------------------------------------------------------------------------------- the store


def added(owner: str = "local", data: dict[str, Any] = TIME) -> AddedServer:
    plan = plan_for(entry(data), ["npm", "pypi"])
    return AddedServer(default_name(plan.entry), "time", owner, plan, plan.digest(), "/x/bin/mcp-server-time", "t")


def test_the_store_keeps_each_principals_servers_in_a_private_file_of_its_own(tmp_path: Path) -> None:
    store = AddedStore(tmp_path / "added")
    store.save("local", [added()])
    store.save("t-0123456789ab", [added("t-0123456789ab")])
    assert store.load("local") == [added()]
    assert store.load("t-0123456789ab") == [added("t-0123456789ab")]
    assert store.load("someone-else") == []
    assert store.path("local") != store.path("t-0123456789ab")
    assert stat.S_IMODE(store.path("local").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "added").stat().st_mode) == 0o700
    assert added().hub_name == "time@local" and owner_tag("Some Owner/../x").startswith("p")


def test_a_damaged_file_is_a_clear_error_and_a_file_edited_to_run_something_else_is_refused(tmp_path: Path) -> None:
    store = AddedStore(tmp_path)
    store.save("local", [added()])
    path = store.path("local")
    document = json.loads(path.read_text())
    document["servers"][0]["plan"]["package"] = "evil-package"  # the digest no longer matches what was consented to
    path.write_text(json.dumps(document))
    with pytest.raises(AddedStoreError, match="does not match what was consented to"):
        store.load("local")
    path.write_text("{not json")
    with pytest.raises(AddedStoreError, match=f"{path}.*is damaged.*left as it is"):
        store.load("local")
    assert path.read_text() == "{not json"
    other = json.loads(json.dumps({"format": 1, "owner": "mallory", "servers": []}))
    path.write_text(json.dumps(other))  # another principal's file put in this one's place
    with pytest.raises(AddedStoreError, match="another principal"):
        store.load("local")


def test_an_added_servers_config_reads_its_secrets_from_the_secret_settings_and_keeps_none_in_the_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "EVERYTHING_TOKEN").write_text("tok-123456\n")
    server = added(data=EVERYTHING)
    config = server.config(tmp_path)
    assert config.env == {"LOG_LEVEL": "info", "EVERYTHING_TOKEN": "tok-123456"}
    assert config.command == "/x/bin/mcp-server-time" and config.args == ("stdio",)
    assert "tok-123456" not in json.dumps(server.as_json()) and "tok-123456" not in config.target
    with pytest.raises(SecretError):
        server.config(tmp_path / "missing")


# ------------------------------------------------------------------------------------------ the setting


def test_the_setting_asks_by_default_and_can_forbid_or_restrict() -> None:
    assert Settings.load(env={}).add_servers == AddPolicy()
    off = Settings.load(env={"MCP_BRIDGE_ADD_SERVERS": "off"}).add_servers
    assert off.refusal("a.b/c", local=True).startswith("adding")
    allowed = add_policy("io.github.acme/*, com.example/weather")
    for local in (True, False):  # an allow list is the operator's: it lets token holders propose those names too
        assert allowed.refusal("io.github.acme/fs", local) == "" and allowed.refusal("com.example/weather", local) == ""
    for lookalike in ("io.github.acme-evil/fs", "io.github.acrne/fs", "io.github.acme.evil/fs", "com.example/weather2",
                      "com.example/Weather", "io.github/acme/fs"):  # fmt: skip
        assert "not among" in allowed.refusal(lookalike, True), lookalike
    with pytest.raises(SettingsError, match="MCP_BRIDGE_ADD_SERVERS"):
        Settings.load(env={"MCP_BRIDGE_ADD_SERVERS": "io.github.acme*"})


def test_ask_lets_only_the_local_user_propose_anything_and_ask_all_lets_token_holders_too() -> None:
    # A token holder can publish a package and say yes to it in his own client: his yes is no operator's consent
    # to run code as the bridge's user, which reads every secret and every other principal's state.
    ask = Settings.load(env={}).add_servers
    assert ask.refusal("io.github.bob/steal", local=True) == ""
    assert "allow list" in ask.refusal("io.github.bob/steal", local=False)
    assert add_policy("ask-all").refusal("io.github.bob/steal", local=False) == ""
    assert Settings.load(env={"MCP_BRIDGE_ADD_SERVERS": "ASK-ALL"}).add_servers == AddPolicy("ask-all")


# ---------------------------------------------------------------------------- what a hostile entry may not do


def with_package(**package: Any) -> dict[str, Any]:
    base = {"registryType": "npm", "identifier": "x-server", "version": "1.0.0", "transport": {"type": "stdio"}}
    return {"name": "io.github.mallory/x", "description": "", "version": "1.0.0", "packages": [{**base, **package}]}


@pytest.mark.parametrize(
    "name", ["LD_PRELOAD", "ld_library_path", "NODE_OPTIONS", "node_path", "PYTHONPATH", "PYTHONSTARTUP", "PATH",
             "npm_config_registry", "NPM_CONFIG_SCRIPT_SHELL", "PIP_INDEX_URL", "BASH_ENV", "HTTPS_PROXY",
             "https_proxy", "NODE_EXTRA_CA_CERTS", "GIT_SSH_COMMAND", "DYLD_INSERT_LIBRARIES",
             "MCP_BRIDGE_SECRETS_DIR"],
)  # fmt: skip
def test_an_entry_cannot_set_a_variable_that_changes_what_runs(name: str) -> None:
    for need in ({"name": name, "default": "/tmp/evil.so"}, {"name": name, "isSecret": True}):
        with pytest.raises(CannotAdd, match="never lets a registry entry set it"):
            plan_for(entry(with_package(environmentVariables=[need])), ["npm"])
    ignored = plan_for(entry(with_package(environmentVariables=[{"name": name}])), ["npm"])  # optional, unset
    assert ignored.env == () and ignored.secrets == ()
    assert plan_for(entry(with_package(environmentVariables=[{"name": "NODE_ENV", "default": "x"}])), ["npm"]).env


def test_a_remote_cannot_set_the_headers_the_http_client_owns() -> None:
    for name in ("Host", "content-length", "Transfer-Encoding", "Mcp-Session-Id"):
        data = {**REMOTE, "remotes": [{**REMOTE["remotes"][0], "headers": [{"name": name, "value": "x"}]}]}
        with pytest.raises(CannotAdd, match="never lets"):
            plan_for(entry(data), [])


@pytest.mark.parametrize(
    ("kind", "version"),
    [("npm", "1"), ("npm", "1.2"), ("npm", "canary"), ("npm", "beta"), ("npm", "v1.0.0"), ("npm", "01.0.0"),
     ("pypi", "dev"), ("pypi", "main")],
)  # fmt: skip
def test_a_version_a_package_manager_reads_as_a_range_or_a_tag_is_refused(kind: str, version: str) -> None:
    identifier = "x-server"
    with pytest.raises(CannotAdd, match="not one exact release"):
        plan_for(entry(with_package(registryType=kind, identifier=identifier, version=version)), ["npm", "pypi"])


def test_exact_versions_still_plan() -> None:
    for kind, version in (("npm", "1.0.0-rc.1+b7"), ("pypi", "2026.10.19"), ("pypi", "1.0rc1"), ("pypi", "2")):
        plan = plan_for(entry(with_package(registryType=kind, version=version)), ["npm", "pypi"])
        assert plan.version == version


def test_a_token_principals_server_gets_only_the_secrets_provisioned_for_it(tmp_path: Path) -> None:
    # Bob publishes an entry asking for the operator's EVERYTHING_TOKEN and says yes to it himself: his server must
    # not be given the bridge's own value, only one the operator put in Bob's own folder.
    (tmp_path / "EVERYTHING_TOKEN").write_text("operator-token-123\n")
    bob = "t-bbbbbbbbbbbb"
    with pytest.raises(SecretError):
        added(bob, EVERYTHING).config(tmp_path)
    (tmp_path / bob).mkdir()
    (tmp_path / bob / "EVERYTHING_TOKEN").write_text("bobs-own-token-456\n")
    assert added(bob, EVERYTHING).config(tmp_path).env["EVERYTHING_TOKEN"] == "bobs-own-token-456"
    assert added("local", EVERYTHING).config(tmp_path).env["EVERYTHING_TOKEN"] == "operator-token-123"
    (tmp_path / "t-aaaaaaaaaaaa").symlink_to(tmp_path)  # a principal cannot name its way into another's folder
    with pytest.raises(SecretError):
        added("t-aaaaaaaaaaaa/..", EVERYTHING).config(tmp_path)


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.backend  # it starts a process (an installer's stand-in), as only backend tests may
@pytest.mark.parametrize("ending", ["exits", "is cut short"])
def test_an_install_script_that_leaves_a_child_behind_neither_holds_the_install_nor_outlives_it(
    tmp_path: Path, ending: str
) -> None:
    # A package's install script starts a child that keeps the installer's output open and lives on. Before, the
    # install waited for that output to close: past its own timeout (asyncio waits for the pipes before it reports an
    # exit), and every other add waited behind it. Now the install ends with its installer, and the child with it.
    plan = plan_for(entry(TIME), ["pypi"])
    pidfile = tmp_path / "child.pid"
    script = f"sleep 600 & echo $! > {pidfile}" + ("; wait" if ending == "is cut short" else "")

    async def main() -> int:
        async with asyncio.timeout(120):  # not a measure: a hang is turned into a failure
            task = asyncio.create_task(installs._run(plan, ["sh", "-c", script]))
            while not task.done() and (not pidfile.exists() or not pidfile.read_text().strip()):
                await asyncio.sleep(0.02)
            if ending == "is cut short":
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            else:
                await task
        return int(pidfile.read_text())

    child = asyncio.run(main())
    for _ in range(500):  # SIGKILL is delivered at once, but the exit is the kernel's to finish
        if _gone(child):
            break
        asyncio.run(asyncio.sleep(0.02))
    assert _gone(child)
