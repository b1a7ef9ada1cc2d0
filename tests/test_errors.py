"""Every deliberate error derives from one base, and that base can carry the fix apart from the message.

Pure logic; the last test drives the real command line's ``main`` in-process (it fails before any sandbox is
chosen), the one place a ``fix`` is shown today.
"""

from __future__ import annotations

import pickle

import pytest

from mcp_codemode.cli.main import main
from mcp_codemode.errors import CodemodeError, SettingsError
from mcp_codemode.face.tool import InvalidArguments
from mcp_codemode.runs.saved_tools import SavedToolProblem
from mcp_codemode.sandbox.seccomp import SeccompUnavailable
from mcp_codemode.upstream.tools.validate import ArgumentProblem


@pytest.mark.parametrize("error", [SeccompUnavailable, ArgumentProblem, SavedToolProblem, InvalidArguments])
def test_every_deliberate_error_derives_from_the_one_base(error):
    assert issubclass(error, CodemodeError)


@pytest.mark.parametrize("error", [ArgumentProblem, SavedToolProblem, InvalidArguments])
def test_errors_callers_catch_as_value_errors_still_are(error):
    assert issubclass(error, ValueError)


def test_without_a_fix_the_message_is_exactly_the_text_given():
    assert str(SettingsError("MCP_BRIDGE_TIMEOUT='30s' is not valid")) == "MCP_BRIDGE_TIMEOUT='30s' is not valid"
    assert CodemodeError("x").fix is None


def test_a_fix_follows_the_message_and_survives_pickling():
    error = SettingsError("the port is taken", fix="choose another with --port")
    assert str(error) == "the port is taken; choose another with --port"
    assert error.fix == "choose another with --port"
    copy = pickle.loads(pickle.dumps(error))
    assert str(copy) == str(error)
    assert copy.fix == error.fix


def test_an_unreadable_file_to_run_says_what_to_give_instead(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing.py")]) == 125
    stderr = capsys.readouterr().err
    assert stderr.startswith(f"mcp-codemode: cannot read {tmp_path / 'missing.py'}: ")
    assert stderr.endswith("; give a UTF-8 file you can read, - for standard input, or -c CODE\n")


def _public_exceptions() -> list[type[BaseException]]:
    """Every exception class a host module defines under a public name (the guest has its own, MCPError, tree)."""
    import importlib
    import inspect
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "src"
    found = []
    for path in sorted((root / "mcp_codemode").rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if "guest" in parts or parts[-1] == "__main__":
            continue
        module = importlib.import_module(".".join(p for p in parts if p != "__init__"))
        found += [
            value
            for name, value in vars(module).items()
            if inspect.isclass(value) and issubclass(value, BaseException) and not name.startswith("_")
            and value.__module__ == module.__name__
        ]  # fmt: skip
    return found


def test_every_public_exception_of_the_host_is_a_codemode_error():
    found = _public_exceptions()
    assert len(found) > 30  # the walk found the modules
    outside = sorted(
        f"{error.__module__}.{error.__qualname__}" for error in found if not issubclass(error, CodemodeError)
    )
    assert outside == [], f"derive these from CodemodeError (keeping the base callers catch them by): {outside}"
