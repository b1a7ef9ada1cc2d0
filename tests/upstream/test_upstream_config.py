"""Pure logic: finding MCP server configs in every client's format and normalising them.

Every test builds a real home and project directory under tmp_path and writes the files the way each
client does; nothing reads the developer's own home, working directory or environment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.upstream.config.discovery import (
    bridge_identity,
    default_sources,
    derive_alias,
    discover,
    launches_bridge,
)
from mcp_codemode.upstream.model import ConfigProblem, Discovery, ServerConfig

SELF_REASON = (
    "launches mcp-codemode itself, which would nest code mode inside code mode; "
    "set MCP_BRIDGE_ALLOW_SELF_SERVER=1 to use it anyway"
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home" / "user"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def cwd(tmp_path: Path) -> Path:
    path = tmp_path / "work" / "project"
    path.mkdir(parents=True)
    return path


def write(path: Path, content: Any) -> Path:
    """Write a file (a dict or list becomes JSON), making its directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2), encoding="utf-8")
    return path


def find(home: Path, cwd: Path, env: dict[str, str] | None = None, **options: Any) -> Discovery:
    return discover(home=home, cwd=cwd, env=env or {}, platform=options.pop("platform", "linux"), **options)


def stdio(name: str, source: Path | str, command: str, *args: str, **fields: Any) -> ServerConfig:
    alias = fields.pop("alias", derive_alias(name))
    return ServerConfig(
        name=name, alias=alias, transport="stdio", source=str(source), command=command, args=args, **fields
    )


def remote(name: str, source: Path | str, transport: Any, url: str, **fields: Any) -> ServerConfig:
    alias = fields.pop("alias", derive_alias(name))
    return ServerConfig(name=name, alias=alias, transport=transport, source=str(source), url=url, **fields)


def reasons(found: Discovery) -> list[tuple[str, str]]:
    return [(skip.config.name, skip.reason) for skip in found.skipped]


# --- sources -----------------------------------------------------------------------------------------------


def test_nothing_configured_is_quiet(home, cwd):
    assert find(home, cwd) == Discovery()


def test_default_sources_in_precedence_order_on_linux(home, cwd):
    assert default_sources(home, cwd, "linux") == [
        (cwd / "mcp-servers", "codemode-dir"),
        (home / ".claude.json", "claude-code-project"),
        (cwd / ".mcp.json", "json"),
        (cwd / ".cursor/mcp.json", "json"),
        (cwd / ".vscode/mcp.json", "vscode"),
        (cwd / ".gemini/settings.json", "gemini"),
        (home / "MCPs", "dir"),
        (home / ".config/mcp/servers", "dir"),
        (home / ".claude.json", "claude-code"),
        (home / ".config/Claude/claude_desktop_config.json", "claude-desktop"),
        (home / ".cursor/mcp.json", "json"),
        (home / ".codeium/windsurf/mcp_config.json", "json"),
        (home / ".gemini/settings.json", "gemini"),
        (home / ".codex/config.toml", "codex"),
    ]


def test_default_sources_follow_codex_home_and_xdg_config_home(home, cwd, tmp_path):
    env = {"CODEX_HOME": str(tmp_path / "codex"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    sources = dict((str(path), fmt) for path, fmt in default_sources(home, cwd, "linux", env=env))
    assert sources[str(tmp_path / "codex/config.toml")] == "codex"
    assert sources[str(tmp_path / "xdg/Claude/claude_desktop_config.json")] == "claude-desktop"
    assert sources[str(tmp_path / "xdg/mcp/servers")] == "dir"
    assert str(home / ".codex/config.toml") not in sources


def test_claude_desktop_path_depends_on_the_platform(home, cwd):
    mac = write(
        home / "Library/Application Support/Claude/claude_desktop_config.json",
        {"mcpServers": {"mac-only": {"command": "mac-server"}}},
    )
    linux = write(
        home / ".config/Claude/claude_desktop_config.json", {"mcpServers": {"linux-only": {"command": "linux-server"}}}
    )
    on_mac = find(home, cwd, platform="darwin")
    on_linux = find(home, cwd, platform="linux")
    assert on_mac.servers == (stdio("mac-only", mac, "mac-server"),)
    assert on_mac.sources == (str(mac),)
    assert on_linux.servers == (stdio("linux-only", linux, "linux-server"),)
    assert on_linux.sources == (str(linux),)


def test_generic_json_stdio_and_remote_entries(home, cwd):
    path = write(
        cwd / "mcp-servers/team.json",
        {
            "mcpServers": {
                "files": {
                    "command": "npx",
                    "args": ["-y", "@scope/files", "/data"],
                    "env": {"LOG": "debug"},
                    "description": "Read the shared data directory",
                    "timeout": 12.5,
                },
                "search": {"url": "https://search.example.com/mcp", "headers": {"X-Team": "core"}},
                "events": {"url": "https://events.example.com/v1/sse/"},
                "stream": {"url": "https://stream.example.com/sse", "transport": "streamableHttp"},
                "legacy-sse": {"type": "sse", "url": "https://old.example.com/events"},
                "modern": {"command": "modern-server", "protocol": "2026-07-28"},
                "probe": {"command": "probe-server", "protocol": "AUTO"},
            }
        },
    )
    found = find(home, cwd)
    assert found.problems == ()
    assert found.servers == (
        stdio(
            "files",
            path,
            "npx",
            "-y",
            "@scope/files",
            "/data",
            env={"LOG": "debug"},
            description="Read the shared data directory",
            timeout=12.5,
        ),
        remote("search", path, "http", "https://search.example.com/mcp", headers={"X-Team": "core"}),
        remote("events", path, "sse", "https://events.example.com/v1/sse/"),
        remote("stream", path, "http", "https://stream.example.com/sse"),
        remote("legacy-sse", path, "sse", "https://old.example.com/events"),
        stdio("modern", path, "modern-server", protocol="2026-07-28"),
        stdio("probe", path, "probe-server", protocol="auto"),
    )
    assert found.servers[0].protocol == "legacy"


def test_directories_are_read_in_sorted_order_and_skip_other_files(home, cwd):
    write(home / "MCPs/b.json", {"mcpServers": {"shared": {"command": "from-b"}, "only-b": {"command": "b"}}})
    a = write(home / "MCPs/a.json", {"servers": {"shared": {"command": "from-a"}}})
    write(home / "MCPs/notes.txt", "not a config")
    write(home / "MCPs/.editor-backup.json", "{ broken")
    found = find(home, cwd)
    assert [(s.name, s.command) for s in found.servers] == [("shared", "from-a"), ("only-b", "b")]
    assert reasons(found) == [("shared", f"shadowed by {a}")]
    assert found.sources == (str(a), str(home / "MCPs/b.json"))
    assert found.problems == ()


def test_a_file_in_a_server_directory_must_hold_servers(home, cwd):
    path = write(cwd / "mcp-servers/empty.json", {"theme": "dark"})
    assert find(home, cwd).problems == (
        ConfigProblem(
            str(path), None, 'has no "mcpServers" (or "servers") object; put the servers in {"mcpServers": {...}}'
        ),
    )


def test_client_settings_files_without_servers_are_quiet(home, cwd):
    write(home / ".gemini/settings.json", {"theme": "GitHub"})
    write(home / ".claude.json", {"numStartups": 3, "projects": {}})
    found = find(home, cwd)
    assert found.problems == ()
    assert found.servers == ()
    assert found.sources == (str(home / ".claude.json"), str(home / ".gemini/settings.json"))


def test_claude_code_project_servers_come_from_this_projects_entry_only(home, cwd, tmp_path):
    claude = home / ".claude.json"
    write(
        claude,
        {
            "mcpServers": {"user-wide": {"command": "user-server"}, "both": {"command": "user-both"}},
            "projects": {
                str(cwd): {"mcpServers": {"both": {"command": "project-both"}, "local": {"command": "local-server"}}},
                str(tmp_path / "elsewhere"): {"mcpServers": {"other": {"command": "other-server"}}},
            },
        },
    )
    shared = write(cwd / ".mcp.json", {"mcpServers": {"local": {"command": "team-server"}}})
    found = find(home, cwd)
    project_source = f"{claude} (project {cwd})"
    assert found.servers == (
        stdio("both", project_source, "project-both"),
        stdio("local", project_source, "local-server"),
        stdio("user-wide", claude, "user-server"),
    )
    assert reasons(found) == [("local", f"shadowed by {project_source}"), ("both", f"shadowed by {project_source}")]
    assert found.sources == (str(claude), str(shared))


def test_vscode_servers_key_types_and_variables(home, cwd):
    path = write(
        cwd / ".vscode/mcp.json",
        """{
  // VS Code allows comments and trailing commas in this file
  "inputs": [{"type": "promptString", "id": "api-key", "description": "API key", "password": true}],
  "servers": {
    "fs": {
      "type": "stdio",
      "command": "npx",
      "args": ["-y", "fs-server", "${workspaceFolder}/docs", "${userHome}", "http://not/a//comment"],
      "env": {"TOKEN": "${env:FS_TOKEN}", "NOTE": "keep , } and /* this */"},
    },
    /* a remote one */
    "api": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"X-Key": "${input:api-key}"}},
    "events": {"type": "sse", "url": "https://events.example.com/stream"},
  },
}""",
    )
    found = find(home, cwd, {"FS_TOKEN": "fs-secret"})
    assert found.servers == (
        stdio(
            "fs",
            path,
            "npx",
            "-y",
            "fs-server",
            f"{cwd}/docs",
            str(home),
            "http://not/a//comment",
            env={"TOKEN": "fs-secret", "NOTE": "keep , } and /* this */"},
        ),
        remote("events", path, "sse", "https://events.example.com/stream"),
    )
    assert found.problems == (
        ConfigProblem(
            str(path),
            "api",
            "uses ${input:api-key}, which only VS Code can ask for; put the value in an environment variable "
            "and write ${env:NAME} instead",
        ),
    )


def test_gemini_timeout_is_milliseconds_url_is_sse_and_http_url_is_streamable(home, cwd):
    path = write(
        home / ".gemini/settings.json",
        {
            "theme": "Default",
            "mcpServers": {
                "local": {"command": "python", "args": ["-m", "my_server"], "cwd": "./servers", "timeout": 30000},
                "events": {"url": "https://events.example.com/stream", "headers": {"X-Id": "7"}},
                "api": {"httpUrl": "https://api.example.com/mcp", "timeout": 1500},
                "confused": {"url": "https://a.example.com/sse", "httpUrl": "https://a.example.com/mcp"},
            },
        },
    )
    found = find(home, cwd)
    assert found.servers == (
        stdio("local", path, "python", "-m", "my_server", cwd=str(home / ".gemini/servers"), timeout=30.0),
        remote("events", path, "sse", "https://events.example.com/stream", headers={"X-Id": "7"}),
        remote("api", path, "http", "https://api.example.com/mcp", timeout=1.5),
    )
    assert found.problems == (ConfigProblem(str(path), "confused", "has both url and httpUrl; keep one"),)


def test_gemini_timeout_message_names_milliseconds(home, cwd):
    path = write(home / ".gemini/settings.json", {"mcpServers": {"slow": {"command": "x", "timeout": "30s"}}})
    assert find(home, cwd).problems == (
        ConfigProblem(str(path), "slow", "timeout must be a positive number of milliseconds"),
    )


CODEX_TOML = """\
model = "o4-mini"

[mcp_servers.docs]
command = "npx"
args = ["-y", "docs-mcp"]
env = { DOCS_LANG = "en" }
cwd = "/srv/docs"
tool_timeout_sec = 45
startup_timeout_sec = 20

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "REMOTE_TOKEN"
http_headers = { "X-Team" = "core" }
env_http_headers = { "X-Org" = "ORG_ID" }

[mcp_servers.events]
url = "https://mcp.example.com/sse"

[mcp_servers.off]
command = "off-server"
enabled = false

[mcp_servers.locked]
url = "https://locked.example.com/mcp"
bearer_token_env_var = "LOCKED_TOKEN"
"""


def test_codex_toml(home, cwd):
    path = write(home / ".codex/config.toml", CODEX_TOML)
    found = find(home, cwd, {"REMOTE_TOKEN": "tok-123", "ORG_ID": "org-9"})
    assert found.servers == (
        stdio("docs", path, "npx", "-y", "docs-mcp", env={"DOCS_LANG": "en"}, cwd="/srv/docs", timeout=45.0),
        remote(
            "remote",
            path,
            "http",
            "https://mcp.example.com/mcp",
            headers={"X-Team": "core", "X-Org": "org-9", "Authorization": "Bearer tok-123"},
        ),
        remote("events", path, "http", "https://mcp.example.com/sse"),  # Codex speaks streamable HTTP only
    )
    assert found.servers[1].headers["Authorization"] == "Bearer tok-123"
    assert reasons(found) == [("off", f"disabled in {path}")]
    assert found.problems == (
        ConfigProblem(
            str(path),
            "locked",
            "needs environment variable LOCKED_TOKEN (bearer_token_env_var), which is not set; set it",
        ),
    )


def test_codex_toml_syntax_error_names_line_and_column(home, cwd):
    path = write(home / ".codex/config.toml", '[mcp_servers.a]\ncommand = "x"\nargs = [1,, 2]\n')
    assert find(home, cwd).problems == (
        ConfigProblem(str(path), None, "is not valid TOML: Invalid value (at line 3, column 11)"),
    )


def test_windsurf_remote_entries_use_server_url(home, cwd):
    path = write(
        home / ".codeium/windsurf/mcp_config.json",
        {
            "mcpServers": {
                "remote": {"serverUrl": "https://w.example.com/mcp", "headers": {"X-A": "1"}},
                "local": {"command": "local-server", "disabled": True},
            }
        },
    )
    found = find(home, cwd)
    assert found.servers == (remote("remote", path, "http", "https://w.example.com/mcp", headers={"X-A": "1"}),)
    assert reasons(found) == [("local", f"disabled in {path}")]


def test_cursor_project_then_user(home, cwd):
    project = write(cwd / ".cursor/mcp.json", {"mcpServers": {"db": {"command": "db-project"}}})
    user = write(home / ".cursor/mcp.json", {"mcpServers": {"db": {"command": "db-user"}, "web": {"command": "w"}}})
    found = find(home, cwd)
    assert found.servers == (stdio("db", project, "db-project"), stdio("web", user, "w"))
    assert reasons(found) == [("db", f"shadowed by {project}")]


def test_home_as_working_directory_reads_each_file_once(home):
    path = write(home / ".cursor/mcp.json", {"mcpServers": {"db": {"command": "db"}}})
    found = find(home, home)
    assert found.servers == (stdio("db", path, "db"),)
    assert found.skipped == ()
    assert found.sources == (str(path),)


# --- precedence and shadowing ------------------------------------------------------------------------------


def test_highest_precedence_definition_wins_and_the_rest_are_shadowed(home, cwd, tmp_path):
    explicit = write(tmp_path / "mine.json", {"mcpServers": {"github": {"command": "gh-explicit"}}})
    project = write(cwd / ".mcp.json", {"mcpServers": {"github": {"command": "gh-project"}, "p": {"command": "p"}}})
    desktop = write(
        home / ".config/Claude/claude_desktop_config.json",
        {"mcpServers": {"github": {"command": "gh-desktop"}, "p": {"command": "p2"}}},
    )
    found = find(home, cwd, explicit=[explicit])
    assert found.servers == (stdio("github", explicit, "gh-explicit"), stdio("p", project, "p"))
    assert reasons(found) == [
        ("github", f"shadowed by {explicit}"),
        ("github", f"shadowed by {explicit}"),
        ("p", f"shadowed by {project}"),
    ]
    assert [skip.config.source for skip in found.skipped] == [str(project), str(desktop), str(desktop)]
    assert [skip.config.command for skip in found.skipped] == ["gh-project", "gh-desktop", "p2"]
    assert found.problems == ()
    assert found.sources == (str(explicit), str(project), str(desktop))


def test_shadowed_copies_are_never_problems_even_when_broken(home, cwd):
    winner = write(cwd / ".mcp.json", {"mcpServers": {"github": {"command": "gh"}}})
    write(
        home / ".cursor/mcp.json",
        {"mcpServers": {"github": {"command": "gh", "env": {"TOKEN": "${GITHUB_TOKEN}"}, "args": "oops"}}},
    )
    found = find(home, cwd)
    assert found.problems == ()
    assert reasons(found) == [("github", f"shadowed by {winner}")]


def test_a_disabled_definition_switches_off_lower_ones(home, cwd, tmp_path):
    mask = write(tmp_path / "mask.json", {"mcpServers": {"github": {"disabled": True}}})
    user = write(home / ".claude.json", {"mcpServers": {"github": {"command": "gh"}}})
    found = find(home, cwd, explicit=[mask])
    assert found.servers == ()
    assert reasons(found) == [
        ("github", f"disabled in {mask}"),
        ("github", f"shadowed by {mask}, which is not used either (disabled in {mask})"),
    ]
    assert found.skipped[1].config == stdio("github", user, "gh")
    assert found.problems == ()


def test_a_broken_definition_is_not_replaced_by_a_lower_one(home, cwd):
    project = write(cwd / ".mcp.json", {"mcpServers": {"api": {"url": "https://x.example.com", "command": "x"}}})
    write(home / ".claude.json", {"mcpServers": {"api": {"command": "api-server"}}})
    found = find(home, cwd)
    assert found.servers == ()
    assert found.problems == (
        ConfigProblem(
            str(project),
            "api",
            "has both command and url; a server is either started (command) or reached over the network (url): "
            "keep one",
        ),
    )
    assert reasons(found) == [
        ("api", f"shadowed by {project}, which cannot be used (see the problem reported there)"),
    ]


def test_a_name_twice_in_one_file(home, cwd):
    path = write(cwd / ".mcp.json", {"mcpServers": {"a": {"command": "first"}}, "servers": {"a": {"command": "2"}}})
    found = find(home, cwd)
    assert found.servers == (stdio("a", path, "first"),)
    assert reasons(found) == [("a", "shadowed by an earlier entry in the same file")]


def test_problems_are_listed_in_precedence_order(home, cwd):
    first = write(cwd / ".mcp.json", {"mcpServers": {"a": {"command": 1}}})
    second = write(cwd / ".cursor/mcp.json", "[]")
    third = write(home / ".claude.json", {"mcpServers": {"b": {}}})
    assert [(p.source, p.server) for p in find(home, cwd).problems] == [
        (str(first), "a"),
        (str(second), None),
        (str(third), "b"),
    ]


# --- explicit files ----------------------------------------------------------------------------------------


def test_explicit_files_only_when_discovery_is_off(home, cwd, tmp_path):
    one = write(tmp_path / "one.json", {"mcpServers": {"a": {"command": "a1"}}})
    two = write(tmp_path / "two.json", {"mcpServers": {"a": {"command": "a2"}, "b": {"command": "b"}}})
    write(home / ".claude.json", {"mcpServers": {"c": {"command": "c"}}})
    found = find(home, cwd, explicit=[one, two], use_defaults=False)
    assert found.servers == (stdio("a", one, "a1"), stdio("b", two, "b"))
    assert reasons(found) == [("a", f"shadowed by {one}")]
    assert found.sources == (str(one), str(two))


def test_explicit_paths_relative_tilde_directory_toml_and_missing(home, cwd, tmp_path):
    relative = write(cwd / "conf/servers.json", {"mcpServers": {"rel": {"command": "rel"}}})
    tilde = write(home / "team.json", {"mcpServers": {"tilde": {"command": "tilde"}}})
    folder = write(tmp_path / "folder/x.json", {"mcpServers": {"in-dir": {"command": "d"}}})
    codex = write(tmp_path / "extra.toml", '[mcp_servers.toml]\ncommand = "t"\n')
    found = find(
        home,
        cwd,
        explicit=[Path("conf/servers.json"), Path("~/team.json"), folder.parent, codex, tmp_path / "nope.json"],
        use_defaults=False,
    )
    assert found.servers == (
        stdio("rel", relative, "rel"),
        stdio("tilde", tilde, "tilde"),
        stdio("in-dir", folder, "d"),
        stdio("toml", codex, "t"),
    )
    assert found.problems == (
        ConfigProblem(
            str(tmp_path / "nope.json"),
            None,
            "does not exist; check the path given with --config or MCP_SERVERS_CONFIG",
        ),
    )


def test_an_explicit_client_file_keeps_its_format(home, cwd, tmp_path):
    gemini = write(tmp_path / "other/.gemini/settings.json", {"mcpServers": {"g": {"url": "https://g.example.com/x"}}})
    found = find(home, cwd, explicit=[gemini], use_defaults=False)
    assert found.servers == (remote("g", gemini, "sse", "https://g.example.com/x"),)


def test_an_explicit_file_that_is_also_a_default_is_read_once_at_the_higher_rank(home, cwd):
    path = write(home / ".cursor/mcp.json", {"mcpServers": {"a": {"command": "a"}}})
    found = find(home, cwd, explicit=[path])
    assert found.servers == (stdio("a", path, "a"),)
    assert found.skipped == ()


# --- broken files and entries ------------------------------------------------------------------------------


def test_a_broken_json_file_next_to_a_good_one(home, cwd):
    broken = write(cwd / "mcp-servers/a-broken.json", '{\n  "mcpServers": {\n    "x": {"command": "x"}\n    "y": {}\n')
    good = write(cwd / "mcp-servers/b-good.json", {"mcpServers": {"good": {"command": "good"}}})
    found = find(home, cwd)
    assert found.servers == (stdio("good", good, "good"),)
    assert found.problems == (
        ConfigProblem(
            str(broken), None, "is not valid JSON: Expecting ',' delimiter at line 4, column 5; fix it there"
        ),
    )
    assert found.sources == (str(broken), str(good))


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[1, 2]", 'is not a JSON object such as {"mcpServers": {...}}: its top level is a list'),
        ('{"mcpServers": []}', '"mcpServers" must be an object keyed by server name'),
        ("", "is not valid JSON: Expecting value at line 1, column 1; fix it there"),
    ],
)
def test_file_level_problems(home, cwd, content, reason):
    path = write(cwd / ".mcp.json", content)
    assert find(home, cwd).problems == (ConfigProblem(str(path), None, reason),)


def test_a_file_that_is_not_utf8(home, cwd):
    path = cwd / ".mcp.json"
    path.write_bytes(b'{"mcpServers":\n {"a": {"command": "caf\xe9"}}}')  # Latin-1, not UTF-8
    assert find(home, cwd).problems == (
        ConfigProblem(str(path), None, "is not UTF-8 text (line 2 has a byte that is not); save it as UTF-8"),
    )


def test_a_broken_claude_json_is_reported_once(home, cwd):
    path = write(home / ".claude.json", "{oops")
    problems = find(home, cwd).problems
    assert [(p.source, p.reason) for p in problems] == [
        (
            str(home / ".claude.json"),
            "is not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2; fix it there",
        )
    ]
    assert str(path) == problems[0].source


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("npx -y thing", "must be an object with command or url, not a string"),
        (
            {"args": ["x"]},
            'has neither command nor url; add "command" (and "args") to start a local server, or "url" '
            "to reach a remote one",
        ),
        (
            {"command": ["npx", "x"]},
            "command must be a non-empty string naming the program to start; its arguments go in args",
        ),
        ({"command": " "}, "command must be a non-empty string naming the program to start; its arguments go in args"),
        (
            {"command": "x", "args": "-y thing"},
            'args must be a list of strings such as ["-y", "some-package"], not a string',
        ),
        ({"command": "x", "args": ["--port", 8080]}, "args[1] must be a string, not a number; put it in quotes"),
        ({"command": "x", "env": {"PORT": 8080}}, "env['PORT'] must be a string, not a number; put it in quotes"),
        ({"command": "x", "env": ["A=1"]}, "env must be an object of names to string values, not a list"),
        ({"command": "x", "cwd": 3}, "cwd must be a string, not a number"),
        (
            {"command": "x", "type": "websocket"},
            "type 'websocket' is not known; use stdio, http (streamable HTTP) or sse",
        ),
        (
            {"url": "https://x.example.com", "transport": 5},
            "transport a number is not known; use stdio, http (streamable HTTP) or sse",
        ),
        ({"command": "x", "type": "http"}, "type is http but the entry has command and no url; fix one"),
        (
            {"url": "https://x.example.com", "type": "stdio"},
            "type is stdio but the entry has url and no command; fix one",
        ),
        (
            {"url": "https://x", "type": "sse", "transport": "http"},
            "has both type and transport, and they disagree; keep one",
        ),
        ({"url": "ftp://x.example.com"}, "url must start with http:// or https://"),
        ({"url": ""}, "url must be a non-empty string such as https://example.com/mcp"),
        ({"url": "https://x", "serverUrl": "https://y"}, "has both url and serverUrl; keep one"),
        ({"command": "x", "disabled": "yes"}, "disabled must be true or false, not a string"),
        (
            {"command": "x", "protocol": "2025-06-18"},
            "protocol '2025-06-18' is a handshake-era version; write \"legacy\" for it (the server picks the version)",
        ),
        (
            {"command": "x", "protocol": "new"},
            'protocol \'new\' is not known; use "legacy" (the default), "auto", or a version such as "2026-07-28"',
        ),
        ({"command": "x", "timeout": 0}, "timeout must be a positive number of seconds"),
        ({"command": "x", "timeout": True}, "timeout must be a positive number of seconds"),
        ({"command": "x", "description": ["a"]}, "description must be a string, not a list"),
        (
            {"command": "x", "envFile": ".env"},
            "uses envFile, which mcp-codemode does not read; copy those variables into env",
        ),
    ],
)
def test_a_broken_entry_next_to_a_good_one(home, cwd, entry, reason):
    path = write(cwd / ".mcp.json", {"mcpServers": {"bad": entry, "good": {"command": "good"}}})
    found = find(home, cwd)
    assert found.problems == (ConfigProblem(str(path), "bad", reason),)
    assert found.servers == (stdio("good", path, "good"),)
    assert found.skipped == ()


def test_an_empty_server_name(home, cwd):
    path = write(cwd / ".mcp.json", {"mcpServers": {"": {"command": "x"}}})
    assert find(home, cwd).problems == (ConfigProblem(str(path), "", "has an empty name; give the server a name"),)


# --- variables, paths --------------------------------------------------------------------------------------


def test_variable_expansion(home, cwd):
    path = write(
        cwd / ".mcp.json",
        {
            "mcpServers": {
                "s": {
                    "command": "${TOOLS}/bin/server",
                    "args": ["--price", "$5", "$HOME", "${EMPTY:-fallback}", "${UNSET:-a b}", "${EMPTY}", "${ {x}"],
                    "env": {"TOKEN": "${TOKEN}", "MIXED": "pre-${TOKEN}-post"},
                    "cwd": "${WORK}",
                },
                "r": {"url": "https://${HOST:-api.example.com}/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            }
        },
    )
    env = {"TOOLS": "/opt/tools", "EMPTY": "", "TOKEN": "t0k", "WORK": "/srv/work"}
    found = find(home, cwd, env)
    assert found.problems == ()
    assert found.servers == (
        stdio(
            "s",
            path,
            "/opt/tools/bin/server",
            "--price",
            "$5",
            "$HOME",
            "fallback",
            "a b",
            "",
            "${ {x}",
            env={"TOKEN": "t0k", "MIXED": "pre-t0k-post"},
            cwd="/srv/work",
        ),
        remote("r", path, "http", "https://api.example.com/mcp", headers={"Authorization": "Bearer t0k"}),
    )


def test_a_missing_variable_makes_the_entry_a_problem(home, cwd):
    path = write(
        cwd / ".mcp.json",
        {
            "mcpServers": {
                "one": {"command": "x", "env": {"KEY": "${API_KEY}"}},
                "two": {"url": "https://${HOST}/mcp", "headers": {"A": "${TOKEN}", "B": "${HOST}"}},
                "odd": {"command": "x", "args": ["${not a name}"]},
                "fine": {"command": "fine"},
            }
        },
    )
    found = find(home, cwd)
    assert found.problems == (
        ConfigProblem(
            str(path),
            "one",
            "needs environment variable API_KEY, which is not set; set it or give a default with ${API_KEY:-value}",
        ),
        ConfigProblem(
            str(path),
            "two",
            "needs environment variables TOKEN, HOST, which are not set; set them or give defaults with "
            "${TOKEN:-value}",
        ),
        ConfigProblem(
            str(path),
            "odd",
            "has a ${...} expression mcp-codemode cannot resolve in args[0]; use ${VAR} or ${VAR:-default} for "
            "environment variables",
        ),
    )
    assert [s.name for s in found.servers] == ["fine"]


def test_disabled_entries_need_no_variables(home, cwd):
    path = write(cwd / ".mcp.json", {"mcpServers": {"off": {"command": "x", "args": ["${NOPE}"], "disabled": True}}})
    found = find(home, cwd)
    assert found.problems == ()
    assert found.skipped[0].config == stdio("off", path, "x", "${NOPE}")
    assert reasons(found) == [("off", f"disabled in {path}")]


def test_tilde_and_relative_cwd(home, cwd, tmp_path):
    path = write(
        tmp_path / "conf/sub/servers.json",
        {
            "mcpServers": {
                "rel": {"command": "~/bin/server", "cwd": "../data"},
                "home": {"command": "x", "cwd": "~"},
                "abs": {"command": "~other/bin/x", "cwd": "/var/lib/x", "args": ["~/not-expanded"]},
            }
        },
    )
    found = find(home, cwd, explicit=[path], use_defaults=False)
    assert found.servers == (
        stdio("rel", path, str(home / "bin/server"), cwd=str(tmp_path / "conf/sub/../data")),
        stdio("home", path, "x", cwd=str(home)),
        stdio("abs", path, "~other/bin/x", "~/not-expanded", cwd="/var/lib/x"),
    )


SECRET = "sk-live-9f8e7d6c5b4a"


def test_secrets_never_appear_in_messages(home, cwd, tmp_path):
    path = write(
        cwd / ".mcp.json",
        {
            "mcpServers": {
                "h1": {"url": "https://x.example.com/mcp", "headers": {"Authorization": f"Bearer {SECRET}", "N": 1}},
                "h2": {"url": f"https://x.example.com/mcp?key={SECRET}", "headers": {"A": f"{SECRET}${{MISSING}}"}},
                "h3": {"url": "https://x", "headers": {"A": f"{SECRET}${{ {SECRET} }}"}},
                "e1": {"command": "x", "env": {"KEY": SECRET, "N": 2}},
                "e2": {"command": "x", "env": {"KEY": f"{SECRET}${{MISSING}}"}, "type": "ftp"},
                "e3": {"command": "x", "args": [SECRET, 3]},
                "t1": {"url": f"ftp://{SECRET}@x"},
                "github": {"command": "gh", "env": {"TOKEN": SECRET}, "disabled": True},
            }
        },
    )
    write(home / ".cursor/mcp.json", {"mcpServers": {"github": {"command": "gh", "env": {"TOKEN": SECRET}}}})
    write(tmp_path / "broken.json", '{"mcpServers": {"a": {"headers": {"A": "' + SECRET + '"}}}')  # unterminated
    found = find(home, cwd, explicit=[tmp_path / "broken.json"])
    messages = [str(problem) for problem in found.problems] + [skip.reason for skip in found.skipped]
    assert len(found.problems) == 8
    assert {p.server for p in found.problems} == {None, "h1", "h2", "h3", "e1", "e2", "e3", "t1"}
    assert [s.config.source for s in found.skipped] == [str(path), str(home / ".cursor/mcp.json")]
    for message in messages:
        assert SECRET not in message
        assert "sk-live" not in message


# The entry docs/clients.md gives for reaching a remote bridge from Claude Desktop, as mcp-remote documents it:
# mcp-remote reads ${AUTH_HEADER} from its own environment, which the entry's env sets.
MCP_REMOTE = {
    "command": "npx",
    "args": ["-y", "mcp-remote", "https://mcp.example.com/mcp", "--header", "Authorization:${AUTH_HEADER}"],
    "env": {"AUTH_HEADER": "Bearer YOUR_TOKEN"},
}
MCP_REMOTE_ARGS = ("-y", "mcp-remote", "https://mcp.example.com/mcp", "--header", "Authorization:Bearer YOUR_TOKEN")

# Where each client keeps its servers (relative to home or cwd), and how it wraps them.
CLIENT_FILES = {
    "claude-desktop": ("home", ".config/Claude/claude_desktop_config.json", "mcpServers"),
    "claude-code": ("home", ".claude.json", "mcpServers"),
    "claude-code-.mcp.json": ("cwd", ".mcp.json", "mcpServers"),
    "cursor": ("home", ".cursor/mcp.json", "mcpServers"),
    "windsurf": ("home", ".codeium/windsurf/mcp_config.json", "mcpServers"),
    "vscode": ("cwd", ".vscode/mcp.json", "servers"),
    "gemini": ("home", ".gemini/settings.json", "mcpServers"),
    "codex": ("home", ".codex/config.toml", "mcp_servers"),
    "own": ("home", "MCPs/servers.json", "mcpServers"),
}


def client_file(home: Path, cwd: Path, client: str, servers: dict[str, dict[str, Any]]) -> Path:
    base, relative, key = CLIENT_FILES[client]
    path = (home if base == "home" else cwd) / relative
    if client != "codex":
        return write(path, {key: servers})
    lines = []
    for name, entry in servers.items():
        lines.append(f"[{key}.{name}]")
        lines += [f"{field} = {json.dumps(value)}" for field, value in entry.items() if field != "env"]
        if "env" in entry:
            lines.append("env = {" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in entry["env"].items()) + "}")
    return write(path, "\n".join(lines) + "\n")


@pytest.mark.parametrize("client", list(CLIENT_FILES))
def test_a_variable_the_entry_s_own_env_defines_takes_that_value_in_every_format(home, cwd, client):
    # The bridge's own AUTH_HEADER is another one (the client's session, another server's): it must not be used.
    path = client_file(home, cwd, client, {"remote": MCP_REMOTE})
    found = find(home, cwd, {"AUTH_HEADER": "Bearer SOMETHING-ELSE"})
    assert found.problems == ()
    assert found.servers == (stdio("remote", path, "npx", *MCP_REMOTE_ARGS, env=MCP_REMOTE["env"]),)
    # The value is a secret like any value of env: the command line as `servers` shows it hides it.
    assert found.servers[0].target == ("npx -y mcp-remote https://mcp.example.com/mcp --header Authorization:<hidden>")


def test_the_claude_desktop_mcp_remote_entry_is_used_even_without_anything_in_the_bridge_s_environment(home, cwd):
    path = client_file(home, cwd, "claude-desktop", {"remote": MCP_REMOTE})
    found = find(home, cwd)
    assert (found.problems, found.skipped) == ((), ())
    assert found.servers == (stdio("remote", path, "npx", *MCP_REMOTE_ARGS, env=MCP_REMOTE["env"]),)


# What a server started by each client gets for one entry: (the client's format, the value of
# args [${SET}, ${UNSET}, $SET, ${env:LOCAL}, ${LOCAL}]), or the problem when the client would refuse or
# break the entry. SET is in the bridge's environment, LOCAL in the entry's env and (another one) in the
# bridge's; UNSET nowhere. Claude Desktop and Codex expand nothing and Gemini CLI keeps what it cannot
# resolve, so an unresolved reference reaches the server as written; Gemini CLI also reads $VAR.
EXPANSION_CASES = {
    "claude-desktop": ["from-bridge", "${UNSET}", "$SET", "bridge-local", "entry-local"],
    "codex": ["from-bridge", "${UNSET}", "$SET", "bridge-local", "entry-local"],
    "gemini": ["from-bridge", "${UNSET}", "from-bridge", "bridge-local", "entry-local"],
    "claude-code": None,
    "claude-code-.mcp.json": None,
    "cursor": None,
    "windsurf": None,
    "vscode": None,
    "own": None,
}


@pytest.mark.parametrize(("client", "expected"), list(EXPANSION_CASES.items()))
def test_variables_are_filled_in_as_each_client_does(home, cwd, client, expected):
    entry = {
        "command": "server",
        "args": ["${SET}", "${UNSET}", "$SET", "${env:LOCAL}", "${LOCAL}"],
        "env": {"LOCAL": "entry-local"},
    }
    path = client_file(home, cwd, client, {"s": entry})
    found = find(home, cwd, {"SET": "from-bridge", "LOCAL": "bridge-local"})
    if expected is None:
        assert found.servers == ()
        assert found.problems == (
            ConfigProblem(
                str(path),
                "s",
                "needs environment variable UNSET, which is not set; set it or give a default with ${UNSET:-value}",
            ),
        )
        # With UNSET given, the rest is as Claude Code, Cursor and VS Code fill it in: braced forms only.
        found = find(home, cwd, {"SET": "from-bridge", "LOCAL": "bridge-local", "UNSET": "u"})
        expected = ["from-bridge", "u", "$SET", "bridge-local", "entry-local"]
    assert found.problems == ()
    assert found.servers == (stdio("s", path, "server", *expected, env={"LOCAL": "entry-local"}),)


def test_gemini_reads_bare_variables_only_where_they_are_set(home, cwd):
    path = client_file(
        home,
        cwd,
        "gemini",
        {
            "s": {"command": "server", "args": ["$5", "a$TOKEN", "$UNSET_ONE", "${TOKEN}x"], "env": {"K": "$TOKEN"}},
            "r": {"httpUrl": "https://h/mcp", "headers": {"Authorization": "Bearer $TOKEN"}},
        },
    )
    found = find(home, cwd, {"TOKEN": "t0k"})
    assert found.problems == ()
    assert found.servers == (
        stdio("s", path, "server", "$5", "at0k", "$UNSET_ONE", "t0kx", env={"K": "t0k"}),
        remote("r", path, "http", "https://h/mcp", headers={"Authorization": "Bearer t0k"}),
    )


def test_an_env_value_is_filled_in_from_the_bridge_s_environment_not_from_its_own_block(home, cwd):
    # The clients expand env values from their own environment: a block cannot refer to itself.
    path = client_file(home, cwd, "own", {"s": {"command": "x", "args": ["${B}"], "env": {"A": "a", "B": "${A}"}}})
    found = find(home, cwd, {"A": "bridge-a"})
    assert found.servers == (stdio("s", path, "x", "bridge-a", env={"A": "a", "B": "bridge-a"}),)


# --- self-reference ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "args", "bridge"),
    [
        ("mcp-codemode", [], "mcp-codemode itself"),
        ("/home/u/.local/bin/mcp-codemode", ["serve"], "mcp-codemode itself"),
        ("uvx", ["mcp-codemode", "serve"], "mcp-codemode itself"),
        ("uvx", ["mcp-codemode@latest"], "mcp-codemode itself"),
        ("uvx", ["--from", "git+https://github.com/o/mcp-codemode.git@main", "mcp-codemode"], "mcp-codemode itself"),
        ("pipx", ["run", "--spec=mcp-codemode==0.1", "serve"], "mcp-codemode itself"),
        ("python3", ["-m", "mcp_codemode", "serve"], "mcp-codemode itself"),
        ("python3", ["-m", "mcp_codemode.cli"], "mcp-codemode itself"),
        ("python", ["-mmcp_codemode"], "mcp-codemode itself"),
        ("uv", ["run", "--directory", "/src/mcp-codemode", "mcp-codemode"], "mcp-codemode itself"),
        (
            "uvx",
            ["mcp-server-code-execution-mode", "run"],
            "mcp-server-code-execution-mode, the reference code-mode bridge",
        ),
        (
            "python",
            ["/opt/bridge/mcp_server_code_execution_mode.py"],
            "mcp-server-code-execution-mode, the reference code-mode bridge",
        ),
        ("uvx", ["mcp-server-time"], None),
        ("uvx", ["mcp-codemode-helper"], None),
        ("npx", ["-y", "@acme/codemode"], None),
        ("uv", ["run", "--directory", "/src/mcp-codemode", "python", "other_server.py"], None),
        ("uv", ["--directory=/src/mcp-codemode", "run", "other"], None),
        ("python", ["-m", "mcp_server_fetch"], None),
        ("node", ["/srv/mcp-codemode-fork/index.js"], None),
    ],
)
def test_what_counts_as_launching_the_bridge(command, args, bridge):
    config = ServerConfig(name="n", alias="n", transport="stdio", source="s", command=command, args=tuple(args))
    assert launches_bridge(config) == bridge


def test_remote_entries_never_count_as_the_bridge():
    config = ServerConfig(name="n", alias="n", transport="http", source="s", url="https://h/mcp-codemode")
    assert launches_bridge(config) is None


@pytest.mark.parametrize(
    ("server_name", "bridge"),
    [
        ("mcp-codemode", "mcp-codemode itself"),
        ("MCP-Codemode ", "mcp-codemode itself"),
        ("mcp-server-code-execution-mode", "mcp-server-code-execution-mode, the reference code-mode bridge"),
        ("mcp-codemode-helper", None),
        ("everything", None),
        ("", None),
    ],
)
def test_what_server_names_are_a_code_mode_bridge(server_name, bridge):
    assert bridge_identity(server_name) == bridge


def test_self_reference_is_skipped_unless_allowed(home, cwd):
    path = write(
        home / ".claude.json",
        {"mcpServers": {"codemode": {"command": "uvx", "args": ["mcp-codemode"]}, "time": {"command": "t"}}},
    )
    write(home / ".cursor/mcp.json", {"mcpServers": {"codemode": {"command": "mcp-codemode"}}})
    refused = find(home, cwd)
    assert refused.servers == (stdio("time", path, "t"),)
    assert reasons(refused) == [
        ("codemode", SELF_REASON),
        ("codemode", f"shadowed by {path}, which is not used either ({SELF_REASON})"),
    ]
    allowed = find(home, cwd, allow_self=True)
    assert allowed.servers == (stdio("codemode", path, "uvx", "mcp-codemode"), stdio("time", path, "t"))
    assert reasons(allowed) == [("codemode", f"shadowed by {path}")]


# --- aliases -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "alias"),
    [
        ("github", "github"),
        ("GitHub", "github"),
        ("brave-search", "brave_search"),
        ("  my..server!! ", "my_server"),
        ("@scope/pkg", "scope_pkg"),
        ("1password", "s_1password"),
        ("42", "s_42"),
        ("class", "class_"),
        ("Import", "import_"),
        ("None", "none"),
        ("---", "server"),
        ("日本", "server"),
        ("café-db", "caf_db"),
    ],
)
def test_alias_derivation(name, alias):
    assert derive_alias(name) == alias
    assert alias.isidentifier()


def test_alias_collisions_are_numbered_in_precedence_order(home, cwd):
    project = write(
        cwd / ".mcp.json",
        {"mcpServers": {"git-hub": {"command": "a"}, "GitHub": {"command": "b"}, "off_one": {"command": "x"}}},
    )
    user = write(
        home / ".claude.json",
        {
            "mcpServers": {
                "github": {"command": "c"},
                "github_2": {"command": "d"},
                "off-one": {"command": "e", "disabled": True},
                "off one": {"command": "f"},
            }
        },
    )
    found = find(home, cwd)
    assert [(s.name, s.alias) for s in found.servers] == [
        ("git-hub", "git_hub"),
        ("GitHub", "github"),
        ("off_one", "off_one"),
        ("github", "github_2"),
        ("github_2", "github_2_2"),
        ("off one", "off_one_2"),
    ]
    assert [(s.config.name, s.config.alias, s.config.source) for s in found.skipped] == [
        ("off-one", "off_one", str(user))
    ]
    assert found.servers[0].source == str(project)
