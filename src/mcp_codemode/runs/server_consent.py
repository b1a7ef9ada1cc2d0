"""The words of the question that asks a person to add a server (``runtime.add_server``): exactly what would run.

Everything in it comes from the registry, a third party, except the bridge's own words: so every character is shown
as what it is (``approval_question.visible``: a bidi control or a line separator cannot make a name read as
another), nothing is cut (a field too long for a question is refused, not shortened), and the question ends with
the consent code, the start of the plan's digest, which the audit line records beside the answer. The person reads
the command that would run (the package, its exact version, where it is installed, its arguments), or the URL;
the environment variables and headers with their fixed values; and the names of the secrets it would be given,
whose values the question never holds.
"""

from __future__ import annotations

import shlex

from ..errors import CodemodeError
from ..upstream.registry.added import LOCAL, AddedServer, owner_tag
from ..upstream.registry.plans import LaunchPlan
from .approval_question import visible

MAX_QUESTION = 4000  # characters: about a screen of a client's dialog; a longer question is refused, never cut


class QuestionTooLong(CodemodeError):
    """The entry's plan would not fit in a question a person reads whole."""


def consent_question(server: AddedServer, description: str, packages: str) -> str:
    """The elicitation's message (and the console's text) for adding ``server``; ``description`` is the entry's,
    ``packages`` the folder packages are installed under."""
    plan = server.plan
    lines = [
        f"Sandboxed code asks to add the MCP server {visible(plan.entry)} (version {visible(plan.entry_version)}, "
        f"from {visible(plan.source)}) as mcp_{server.alias}, for {visible(server.owner)}.",
        *run_lines(plan, packages, server.owner),
    ]
    if plan.kind == "remote":
        lines.append(f"If it asks you to sign in, run: mcp-codemode login {visible(server.hub_name)}")
    if description:
        lines.append(f"Its description (the registry's words, not checked): {visible(description)}")
    lines.append(f"Consent code: {plan.digest()[:16]}. Add and start this server?")
    text = "\n".join(lines)
    if len(text) > MAX_QUESTION:
        raise QuestionTooLong(
            f"the question to add {plan.entry!r} would be {len(text):,} characters, over the {MAX_QUESTION:,} a person "
            "can read whole",
            fix="ask the person to configure this server by hand",
        )
    return text


def run_lines(plan: LaunchPlan, packages: str, owner: str) -> list[str]:
    """What would run or be contacted, line by line: also what ``mcp-codemode added`` lists. Each argument is quoted
    as a shell would need it, so ``["--root /"]`` never reads as the two arguments ``["--root", "/"]``."""
    if plan.kind == "remote":
        lines = [f"It is a remote server: the bridge would connect to {visible(plan.url)} ({plan.transport})."]
        lines += [f"Header {visible(name)}: {visible(value)}" for name, value in plan.headers]
    else:
        installer = (
            "npm install (from your npm registry)"
            if plan.kind == "npm"
            else "pip install into a new venv (from your Python package index)"
        )
        pin = f"{plan.package}@{plan.version}" if plan.kind == "npm" else f"{plan.package}=={plan.version}"
        arguments = " ".join(shlex.quote(visible(argument)) for argument in plan.arguments)
        lines = [
            f"It would run on this machine, as the bridge's user: {installer} of {visible(pin)} under {packages}, "
            f"then its program {visible(plan.package)} {arguments}".rstrip()
            + "."
        ]
        lines += [f"Environment variable {visible(name)}={visible(value)}" for name, value in plan.env]
    what = "header" if plan.kind == "remote" else "environment variable"
    folder = "" if owner == LOCAL else f"{owner_tag(owner)}/"  # a token principal's are its own (added.py)
    for name in plan.secrets:
        lines.append(
            f"Secret {what} {visible(name)}: its value is read from the file {folder}{visible(name)} in the bridge's "
            "secrets directory (MCP_BRIDGE_SECRETS_DIR), never shown to the code"
        )
    return lines
