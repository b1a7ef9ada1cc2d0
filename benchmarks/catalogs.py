"""Tool catalogs the benchmarks share: the real reference servers' tools, and synthetic distractors.

``real_catalog()``
    The 52 tools of the seven reference MCP servers, exactly as they listed them (benchmarks/corpus/tools, captured
    by benchmarks/corpus/capture.py), as ``(server, Tool)`` pairs in listing order.
``synthetic_catalog(n, seed=0)``
    ``n`` made-up tools spread over about fifty plausible servers (GitHub, Jira, Slack, Postgres, S3, Kubernetes,
    Stripe, a shell, a browser...). Names come in the styles real servers use (snake_case, camelCase, kebab-case,
    dotted, server-prefixed), descriptions run one to three sentences, input schemas have zero to six typed
    parameters with descriptions, some required, some enums or defaults, and some tools declare an output schema.
    They are distractors: they share the real tools' vocabulary (list, get, create, delete, search, read, write,
    file, folder, branch, commit, diff, time, entity, page, url...), so finding a real tool among them is a hard
    test. The same ``n`` and ``seed`` always give the same catalog.
``mixed_catalog(n, seed=0)``
    The real tools plus synthetic ones, ``n`` in all, each server's tools together and the servers in a
    seeded order, so the real servers do not all sit at the front of the listing.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path
from typing import Any

from mcp import types

CORPUS = Path(__file__).resolve().parent / "corpus"
TOOLS_DIR = CORPUS / "tools"
QUERIES_FILE = CORPUS / "queries.json"
REAL_SERVERS = ("everything", "filesystem", "memory", "sequential-thinking", "time", "git", "fetch")

Catalog = list[tuple[str, types.Tool]]


def real_catalog() -> Catalog:
    """The reference servers' tools as captured, ``(server, Tool)`` in each server's listing order."""
    catalog: Catalog = []
    for server in REAL_SERVERS:
        path = TOOLS_DIR / f"{server}.json"
        listed = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(listed, list):
            raise ValueError(f"{path}: expected a JSON list of tools")
        catalog.extend((server, types.Tool.model_validate(item)) for item in listed)
    return catalog


def tool_id(server: str, tool: types.Tool) -> str:
    """How queries.json names a tool: ``server/tool``."""
    return f"{server}/{tool.name}"


@dataclasses.dataclass(frozen=True)
class Query:
    text: str
    relevant: tuple[str, ...]
    split: str
    typo: bool


def load_queries() -> list[Query]:
    """The labelled queries of benchmarks/corpus/queries.json."""
    document = json.loads(QUERIES_FILE.read_text(encoding="utf-8"))
    return [
        Query(
            text=item["query"],
            relevant=tuple(item["relevant"]),
            split=item["split"],
            typo=bool(item.get("typo", False)),
        )
        for item in document["queries"]
    ]


# -- the synthetic catalog's vocabulary ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class F:
    """One parameter (or output property); ``name`` in snake_case, restyled per server."""

    name: str
    type: str
    description: str
    enum: tuple[str, ...] = ()
    default: Any = None
    items: str = "string"  # element type of an array


@dataclasses.dataclass(frozen=True)
class R:
    """A resource a server manages, and which of list/get/create/update/delete/search it offers (``verbs``)."""

    singular: str
    plural: str
    key: F | None
    fields: tuple[F, ...]
    verbs: str = "lgcud"
    required: int = 1  # how many leading fields ``create`` requires
    filters: tuple[str, ...] = ()  # fields that ``list`` accepts as filters
    detail: str = ""  # what a full record includes, for ``get``
    context: tuple[F, ...] | None = None  # None: the server's own context parameters


@dataclasses.dataclass(frozen=True)
class B:
    """A tool that does not fit the list/get/create/update/delete/search mould."""

    words: tuple[str, ...]
    description: str
    params: tuple[F, ...] = ()
    required: tuple[str, ...] = ()
    output: tuple[F, ...] = ()
    context: bool = True


@dataclasses.dataclass(frozen=True)
class S:
    name: str
    product: str
    style: str  # snake | camel | kebab | dotted | prefixed
    where: str  # where its resources live, e.g. "in a GitHub repository"
    context: tuple[F, ...]
    resources: tuple[R, ...]
    bespoke: tuple[B, ...] = ()
    verbs: tuple[tuple[str, str], ...] = ()  # overrides of the verb words, e.g. ("d", "remove")
    page: str = "cursor"  # cursor | page | page_token | offset
    prefix: str = ""


def s(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "string", description, **kw)


def i(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "integer", description, **kw)


def b(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "boolean", description, **kw)


def a(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "array", description, **kw)


def o(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "object", description, **kw)


def num(name: str, description: str = "", **kw: Any) -> F:
    return F(name, "number", description, **kw)


OWNER = s("owner", "Account or organization that owns the repository")
REPO = s("repo", "Repository name, without the owner")
PROJECT = s("project_id", "Numeric ID or URL-encoded path of the project, e.g. group/app")
DATABASE = s("database", "Name of the database to use; defaults to the connection's database")
NAMESPACE = s("namespace", "Kubernetes namespace; defaults to the current context's namespace", default="default")
REGION = s("region", "AWS region such as us-east-1", default="us-east-1")
BUCKET = s("bucket", "Name of the bucket")
WORKSPACE = s("workspace_id", "ID of the workspace")
SITE = s("site_id", "ID of the site or zone")
ACCOUNT = s("account_id", "ID of the account the resource belongs to")

SERVERS: tuple[S, ...] = (
    S(
        "github",
        "GitHub",
        "snake",
        "in a GitHub repository",
        (OWNER, REPO),
        (
            R(
                "issue",
                "issues",
                i("issue_number", "The issue's number within the repository"),
                (
                    s("title", "Issue title"),
                    s("body", "Issue body, Markdown allowed"),
                    s("state", "Filter or set the state", enum=("open", "closed", "all"), default="open"),
                    a("labels", "Label names to apply or filter by"),
                    a("assignees", "Logins of the assignees"),
                ),
                "lgcus",
                filters=("state", "labels"),
                detail="labels, assignees, milestone and reactions",
            ),
            R(
                "pull request",
                "pull requests",
                i("pull_number", "The pull request number"),
                (
                    s("title", "Title of the pull request"),
                    s("head", "Branch that contains the changes"),
                    s("base", "Branch the changes should be merged into"),
                    s("body", "Description of the change"),
                    b("draft", "Open as a draft pull request", default=False),
                ),
                "lgcu",
                required=3,
                filters=("base",),
                detail="its head and base branches, mergeability and checks",
            ),
            R(
                "branch",
                "branches",
                s("branch", "Name of the branch"),
                (
                    s("branch", "Name of the new branch"),
                    s("from_branch", "Branch to start from; default branch if omitted"),
                    b("protected", "Only protected branches"),
                ),
                "lgcd",
                filters=("protected",),
                detail="the commit it points to and its protection rules",
            ),
            R(
                "commit",
                "commits",
                s("sha", "Commit SHA or branch name"),
                (
                    s("path", "Only commits touching this file path"),
                    s("author", "GitHub login or email of the author"),
                    s("since", "ISO 8601 date-time: only commits after this"),
                    s("until", "ISO 8601 date-time"),
                ),
                "lg",
                filters=("path", "author", "since", "until"),
                detail="the author, message, stats and changed files",
            ),
            R(
                "release",
                "releases",
                i("release_id", "ID of the release"),
                (
                    s("tag_name", "Tag the release points at"),
                    s("name", "Release title"),
                    s("body", "Release notes"),
                    b("prerelease", "Mark as a pre-release", default=False),
                ),
                "lgcd",
                detail="its assets and notes",
            ),
            R(
                "workflow run",
                "workflow runs",
                i("run_id", "ID of the workflow run"),
                (
                    s("status", "Run status", enum=("queued", "in_progress", "completed", "failure", "success")),
                    s("branch", "Only runs for this branch"),
                    s("event", "Triggering event, e.g. push"),
                ),
                "lg",
                filters=("status", "branch", "event"),
                detail="its jobs, timing and conclusion",
            ),
            R(
                "gist",
                "gists",
                s("gist_id", "ID of the gist"),
                (
                    s("description", "Description of the gist"),
                    o("files", "Map of file name to {content}"),
                    b("public", "Whether the gist is public", default=False),
                ),
                "lgcd",
                context=(),
            ),
            R(
                "repository",
                "repositories",
                s("repo", "Repository name"),
                (
                    s("name", "Repository name"),
                    s("description", "Short description"),
                    b("private", "Create as a private repository", default=True),
                    s("default_branch", "Default branch"),
                ),
                "lgcd",
                context=(OWNER,),
                detail="topics, default branch, visibility and counts",
            ),
        ),
        (
            B(
                ("get", "file", "contents"),
                "Get the contents of a file or directory from a GitHub repository.",
                (
                    s("path", "Path to the file or directory"),
                    s("ref", "Branch, tag or commit; default branch if omitted"),
                ),
                ("path",),
            ),
            B(
                ("create", "or", "update", "file"),
                "Create or update a single file in a GitHub repository with a commit. Pass the blob SHA to update.",
                (
                    s("path", "Where to write the file"),
                    s("content", "New file content"),
                    s("message", "Commit message"),
                    s("branch", "Branch to commit to"),
                ),
                ("path", "content", "message"),
            ),
            B(
                ("search", "code"),
                "Search for code across GitHub repositories using GitHub's code search syntax.",
                (
                    s("q", "Search query, e.g. 'addClass in:file language:js'"),
                    i("per_page", "Results per page", default=30),
                ),
                ("q",),
                context=False,
            ),
            B(
                ("compare", "commits"),
                "Compare two commits, branches or tags and return the diff and commit list.",
                (s("base", "Base ref"), s("head", "Head ref")),
                ("base", "head"),
            ),
            B(
                ("merge", "pull", "request"),
                "Merge a pull request into its base branch.",
                (
                    i("pull_number", "Pull request number"),
                    s("merge_method", "How to merge", enum=("merge", "squash", "rebase"), default="merge"),
                    s("commit_title", "Title of the merge commit"),
                ),
                ("pull_number",),
            ),
            B(
                ("add", "issue", "comment"),
                "Add a comment to an issue or pull request.",
                (i("issue_number", "Issue or pull request number"), s("body", "Comment text")),
                ("issue_number", "body"),
            ),
            B(
                ("fork", "repository"),
                "Fork a repository to your account or an organization.",
                (s("organization", "Fork into this organization instead of your account"),),
            ),
            B(
                ("list", "notifications"),
                "List notifications for the authenticated user, newest first.",
                (
                    b("all", "Include notifications already marked read", default=False),
                    s("since", "Only notifications updated after this time"),
                ),
                context=False,
            ),
        ),
    ),
    S(
        "gitlab",
        "GitLab",
        "kebab",
        "in a GitLab project",
        (PROJECT,),
        (
            R(
                "merge request",
                "merge requests",
                i("merge_request_iid", "Internal ID of the merge request"),
                (
                    s("title", "Title"),
                    s("source_branch", "Branch with the changes"),
                    s("target_branch", "Branch to merge into"),
                    s("description", "Description, Markdown"),
                    s("state", "Filter by state", enum=("opened", "closed", "merged", "all")),
                ),
                "lgcu",
                required=3,
                filters=("state",),
                detail="diff stats, approvals and pipeline status",
            ),
            R(
                "issue",
                "issues",
                i("issue_iid", "Internal ID of the issue"),
                (
                    s("title", "Title"),
                    s("description", "Issue description"),
                    a("labels", "Labels"),
                    s("milestone", "Milestone title"),
                ),
                "lgcud",
                filters=("labels", "milestone"),
            ),
            R(
                "pipeline",
                "pipelines",
                i("pipeline_id", "ID of the pipeline"),
                (
                    s("ref", "Branch or tag to run the pipeline for"),
                    s("status", "Status filter", enum=("running", "pending", "success", "failed", "canceled")),
                ),
                "lgc",
                filters=("status", "ref"),
                detail="its stages, jobs and durations",
            ),
            R(
                "branch",
                "branches",
                s("branch", "Branch name"),
                (s("branch", "Name of the new branch"), s("ref", "Branch, tag or commit to create it from")),
                "lgcd",
                required=2,
                filters=(),
            ),
            R(
                "repository file",
                "repository files",
                s("file_path", "URL-encoded path of the file"),
                (
                    s("file_path", "Path of the file"),
                    s("branch", "Branch to commit to"),
                    s("content", "File content"),
                    s("commit_message", "Commit message"),
                ),
                "gcud",
                required=4,
            ),
            R(
                "project",
                "projects",
                s("project_id", "ID or path of the project"),
                (
                    s("name", "Project name"),
                    s("visibility", "Visibility", enum=("private", "internal", "public")),
                    s("search", "Filter by name"),
                ),
                "lgs",
                context=(),
                filters=("visibility",),
            ),
        ),
        (
            B(
                ("get", "merge", "request", "diffs"),
                "Get the changes (diffs) of a merge request, file by file.",
                (i("merge_request_iid", "Internal ID of the merge request"),),
                ("merge_request_iid",),
            ),
            B(
                ("get", "repository", "tree"),
                "List files and directories in a project's repository at a ref.",
                (
                    s("path", "Folder inside the repository"),
                    s("ref", "Branch or tag"),
                    b("recursive", "Include nested folders", default=False),
                ),
            ),
            B(
                ("retry", "pipeline", "job"),
                "Retry a failed job of a CI pipeline.",
                (i("job_id", "Job ID"),),
                ("job_id",),
            ),
        ),
        page="page",
    ),
    S(
        "jira",
        "Jira",
        "camel",
        "in a Jira project",
        (),
        (
            R(
                "issue",
                "issues",
                s("issue_key", "Issue key such as PROJ-123"),
                (
                    s("project_key", "Key of the project"),
                    s("summary", "One-line summary"),
                    s("issue_type", "Type of issue", enum=("Bug", "Task", "Story", "Epic")),
                    s("description", "Full description"),
                    s("priority", "Priority", enum=("Highest", "High", "Medium", "Low")),
                    s("assignee", "Account ID of the assignee"),
                ),
                "gcud",
                required=3,
                detail="fields, status, comments and links",
            ),
            R(
                "project",
                "projects",
                s("project_key", "Project key"),
                (s("query", "Filter projects by name"),),
                "lg",
                filters=("query",),
            ),
            R(
                "sprint",
                "sprints",
                i("sprint_id", "ID of the sprint"),
                (
                    i("board_id", "Board the sprint belongs to"),
                    s("name", "Sprint name"),
                    s("start_date", "Start date, ISO 8601"),
                    s("end_date", "End date, ISO 8601"),
                    s("state", "State", enum=("future", "active", "closed")),
                ),
                "lgcu",
                required=2,
                filters=("board_id", "state"),
            ),
            R(
                "comment",
                "comments",
                s("comment_id", "ID of the comment"),
                (s("issue_key", "Issue the comment belongs to"), s("body", "Comment text")),
                "lcd",
                required=2,
                filters=("issue_key",),
            ),
            R(
                "board",
                "boards",
                i("board_id", "Board ID"),
                (s("type", "Board type", enum=("scrum", "kanban")),),
                "lg",
                filters=("type",),
            ),
        ),
        (
            B(
                ("search", "issues"),
                "Search Jira issues with JQL and return the matching issues.",
                (
                    s("jql", "JQL query, e.g. project = PROJ AND status = 'In Progress'"),
                    i("max_results", "Maximum issues", default=50),
                    a("fields", "Fields to return"),
                ),
                ("jql",),
            ),
            B(
                ("transition", "issue"),
                "Move an issue to another workflow status, such as In Progress or Done.",
                (s("issue_key", "Issue key"), s("transition_id", "ID of the transition to perform")),
                ("issue_key", "transition_id"),
            ),
            B(
                ("get", "transitions"),
                "List the workflow transitions currently available for an issue.",
                (s("issue_key", "Issue key"),),
                ("issue_key",),
            ),
            B(
                ("link", "issues"),
                "Create a link between two issues, e.g. 'blocks' or 'relates to'.",
                (s("inward_issue", "Issue key"), s("outward_issue", "Issue key"), s("link_type", "Link type name")),
                ("inward_issue", "outward_issue", "link_type"),
            ),
            B(
                ("log", "work"),
                "Log time spent on an issue.",
                (
                    s("issue_key", "Issue key"),
                    s("time_spent", "Duration such as '3h 20m'"),
                    s("started", "When the work started, ISO 8601"),
                ),
                ("issue_key", "time_spent"),
            ),
        ),
        page="offset",
    ),
    S(
        "linear",
        "Linear",
        "dotted",
        "in a Linear workspace",
        (),
        (
            R(
                "issue",
                "issues",
                s("id", "Issue ID or identifier such as ENG-42"),
                (
                    s("title", "Title"),
                    s("team_id", "Team that owns the issue"),
                    s("description", "Markdown description"),
                    i("priority", "0 none, 1 urgent, 2 high, 3 medium, 4 low", enum=()),
                    s("state_id", "Workflow state"),
                    s("assignee_id", "Assignee"),
                ),
                "lgcuds",
                required=2,
                filters=("team_id", "assignee_id", "state_id"),
                detail="its state, cycle and labels",
            ),
            R(
                "project",
                "projects",
                s("id", "Project ID"),
                (s("name", "Project name"), s("description", "Summary"), s("target_date", "Target date YYYY-MM-DD")),
                "lgcu",
            ),
            R("cycle", "cycles", s("id", "Cycle ID"), (s("team_id", "Team"),), "lg", filters=("team_id",)),
            R("team", "teams", s("id", "Team ID"), (), "lg"),
            R(
                "comment",
                "comments",
                s("id", "Comment ID"),
                (s("issue_id", "Issue to comment on"), s("body", "Markdown")),
                "cud",
                required=2,
            ),
        ),
        (),
        page="cursor",
    ),
    S(
        "slack",
        "Slack",
        "prefixed",
        "in a Slack workspace",
        (),
        (
            R(
                "channel",
                "channels",
                s("channel_id", "Channel ID such as C0123456"),
                (
                    s("name", "Channel name, lowercase, no spaces"),
                    b("is_private", "Create a private channel", default=False),
                    b("exclude_archived", "Leave out archived channels", default=True),
                ),
                "lgc",
                filters=("exclude_archived",),
                detail="topic, purpose and member count",
            ),
            R("user", "users", s("user_id", "User ID"), (), "lg", detail="display name, time zone and status"),
            R(
                "reminder",
                "reminders",
                s("reminder_id", "Reminder ID"),
                (s("text", "What to be reminded of"), s("time", "When: a Unix timestamp or 'in 15 minutes'")),
                "lcd",
                required=2,
            ),
        ),
        (
            B(
                ("post", "message"),
                "Post a message to a Slack channel.",
                (
                    s("channel_id", "Channel to post in"),
                    s("text", "Message text, mrkdwn"),
                    s("thread_ts", "Reply in thread"),
                ),
                ("channel_id", "text"),
            ),
            B(
                ("reply", "to", "thread"),
                "Reply to a message thread in a channel.",
                (
                    s("channel_id", "Channel"),
                    s("thread_ts", "Timestamp of the parent message"),
                    s("text", "Reply text"),
                ),
                ("channel_id", "thread_ts", "text"),
            ),
            B(
                ("get", "channel", "history"),
                "Get recent messages from a channel, newest first.",
                (
                    s("channel_id", "Channel"),
                    i("limit", "Number of messages", default=10),
                    s("oldest", "Only messages after this timestamp"),
                ),
                ("channel_id",),
            ),
            B(
                ("add", "reaction"),
                "Add an emoji reaction to a message.",
                (
                    s("channel_id", "Channel"),
                    s("timestamp", "Message timestamp"),
                    s("reaction", "Emoji name, no colons"),
                ),
                ("channel_id", "timestamp", "reaction"),
            ),
            B(
                ("search", "messages"),
                "Search messages across the workspace.",
                (s("query", "Search terms; supports in:#channel and from:@user"), i("count", "Results", default=20)),
                ("query",),
            ),
            B(
                ("upload", "file"),
                "Upload a file and share it in one or more channels.",
                (
                    s("channels", "Comma-separated channel IDs"),
                    s("filename", "File name"),
                    s("content", "File content"),
                    s("title", "Title"),
                ),
                ("filename", "content"),
            ),
            B(
                ("set", "status"),
                "Set your status text and emoji, optionally until a time.",
                (
                    s("status_text", "Status text"),
                    s("status_emoji", "Emoji such as :palm_tree:"),
                    i("expiration", "Unix time when it clears"),
                ),
                ("status_text",),
            ),
        ),
        prefix="slack",
    ),
    S(
        "discord",
        "Discord",
        "kebab",
        "on a Discord server",
        (s("guild_id", "ID of the Discord server (guild)"),),
        (
            R(
                "channel",
                "channels",
                s("channel_id", "Channel ID"),
                (
                    s("name", "Channel name"),
                    s("type", "Channel type", enum=("text", "voice", "forum")),
                    s("topic", "Channel topic"),
                ),
                "lgcd",
            ),
            R("role", "roles", s("role_id", "Role ID"), (s("name", "Role name"), s("color", "Hex colour")), "lcd"),
            R("member", "members", s("user_id", "User ID"), (i("limit", "Members to return", default=100),), "lg"),
        ),
        (
            B(
                ("send", "message"),
                "Send a message to a Discord channel.",
                (
                    s("channel_id", "Channel"),
                    s("content", "Message content"),
                    b("tts", "Text to speech", default=False),
                ),
                ("channel_id", "content"),
                context=False,
            ),
            B(
                ("read", "messages"),
                "Read the most recent messages in a channel.",
                (s("channel_id", "Channel"), i("limit", "How many", default=50)),
                ("channel_id",),
                context=False,
            ),
            B(
                ("add", "reaction"),
                "React to a message with an emoji.",
                (s("channel_id", "Channel"), s("message_id", "Message"), s("emoji", "Emoji")),
                ("channel_id", "message_id", "emoji"),
                context=False,
            ),
            B(
                ("create", "thread"),
                "Start a thread from a message or in a forum channel.",
                (s("channel_id", "Channel"), s("name", "Thread name"), s("message_id", "Message to start from")),
                ("channel_id", "name"),
                context=False,
            ),
        ),
    ),
    S(
        "gmail",
        "Gmail",
        "prefixed",
        "in the user's Gmail mailbox",
        (),
        (
            R(
                "draft",
                "drafts",
                s("draft_id", "Draft ID"),
                (
                    s("to", "Recipients, comma separated"),
                    s("subject", "Subject line"),
                    s("body", "Plain-text body"),
                    s("cc", "Cc recipients"),
                ),
                "lgcud",
                required=3,
            ),
            R("label", "labels", s("label_id", "Label ID"), (s("name", "Label name"),), "lcd"),
        ),
        (
            B(
                ("send", "email"),
                "Send an email from the user's Gmail account.",
                (
                    s("to", "Recipients"),
                    s("subject", "Subject"),
                    s("body", "Body text"),
                    s("cc", "Cc"),
                    a("attachments", "Paths of files to attach"),
                ),
                ("to", "subject", "body"),
            ),
            B(
                ("search", "emails"),
                "Search the mailbox with Gmail search operators, e.g. from:alice newer_than:7d.",
                (s("query", "Gmail search query"), i("max_results", "Maximum messages", default=20)),
                ("query",),
            ),
            B(
                ("read", "email"),
                "Read one email message, with headers, body and attachment names.",
                (s("message_id", "Message ID"),),
                ("message_id",),
            ),
            B(
                ("modify", "labels"),
                "Add or remove labels on a message, e.g. to archive it or mark it read.",
                (
                    s("message_id", "Message"),
                    a("add_label_ids", "Labels to add"),
                    a("remove_label_ids", "Labels to remove"),
                ),
                ("message_id",),
            ),
            B(("trash", "email"), "Move a message to the trash.", (s("message_id", "Message"),), ("message_id",)),
            B(
                ("download", "attachment"),
                "Download an attachment of a message and save it to a file.",
                (s("message_id", "Message"), s("attachment_id", "Attachment"), s("save_path", "Where to save it")),
                ("message_id", "attachment_id"),
            ),
        ),
        prefix="gmail",
    ),
    S(
        "google-calendar",
        "Google Calendar",
        "dotted",
        "in a Google Calendar",
        (s("calendar_id", "Calendar ID; 'primary' for the user's main calendar", default="primary"),),
        (
            R(
                "event",
                "events",
                s("event_id", "Event ID"),
                (
                    s("summary", "Event title"),
                    s("start", "Start date-time, RFC 3339"),
                    s("end", "End date-time, RFC 3339"),
                    s("time_zone", "IANA time zone of start and end, e.g. Europe/Paris"),
                    a("attendees", "Attendee emails"),
                    s("location", "Where it happens"),
                ),
                "lgcuds",
                required=3,
                filters=("time_zone",),
                detail="attendees, conferencing link and reminders",
            ),
            R(
                "calendar",
                "calendars",
                s("calendar_id", "Calendar ID"),
                (s("summary", "Calendar name"), s("time_zone", "Default time zone of the calendar")),
                "lgcd",
                context=(),
            ),
        ),
        (
            B(
                ("freebusy", "query"),
                "Find when people are busy or free between two times.",
                (
                    s("time_min", "Start of the window, RFC 3339"),
                    s("time_max", "End of the window"),
                    a("emails", "People to check"),
                ),
                ("time_min", "time_max"),
                context=False,
            ),
            B(
                ("events", "quickAdd"),
                "Create an event from a short text like 'Lunch with Sam tomorrow 1pm'.",
                (s("text", "Text describing the event"),),
                ("text",),
            ),
            B(("settings", "getTimezone"), "Get the time zone setting of the user's calendar.", (), context=False),
        ),
        page="page_token",
    ),
    S(
        "google-drive",
        "Google Drive",
        "camel",
        "in Google Drive",
        (),
        (
            R(
                "file",
                "files",
                s("file_id", "Drive file ID"),
                (
                    s("name", "File name"),
                    s("mime_type", "MIME type, e.g. application/vnd.google-apps.document"),
                    s("parent_id", "Folder to put the file in"),
                    s("content", "Text content to upload"),
                ),
                "lgcuds",
                filters=("parent_id", "mime_type"),
                detail="owners, sharing, size and modified time",
            ),
            R(
                "permission",
                "permissions",
                s("permission_id", "Permission ID"),
                (
                    s("file_id", "File to share"),
                    s("email", "Who to share with"),
                    s("role", "Access level", enum=("reader", "commenter", "writer", "owner")),
                ),
                "lcd",
                required=3,
            ),
        ),
        (
            B(
                ("create", "folder"),
                "Create a folder in Google Drive.",
                (s("name", "Folder name"), s("parent_id", "Parent folder; root if omitted")),
                ("name",),
            ),
            B(
                ("move", "file"),
                "Move a Drive file to another folder.",
                (s("file_id", "File"), s("folder_id", "Destination folder")),
                ("file_id", "folder_id"),
            ),
            B(
                ("export", "file"),
                "Export a Google Doc, Sheet or Slides file to PDF, DOCX, CSV or another format.",
                (s("file_id", "File"), s("mime_type", "Target format")),
                ("file_id", "mime_type"),
            ),
            B(
                ("read", "file", "content"),
                "Read the text content of a Drive file; Google Docs come back as Markdown.",
                (s("file_id", "File"),),
                ("file_id",),
            ),
            B(
                ("list", "folder", "children"),
                "List the files and folders inside a Drive folder.",
                (
                    s("folder_id", "Folder ID; 'root' for My Drive", default="root"),
                    i("page_size", "Items", default=100),
                ),
            ),
        ),
        page="page_token",
    ),
    S(
        "notion",
        "Notion",
        "kebab",
        "in a Notion workspace",
        (),
        (
            R(
                "page",
                "pages",
                s("page_id", "Page ID"),
                (
                    s("parent_id", "Parent page or database"),
                    s("title", "Page title"),
                    o("properties", "Property values"),
                    s("content", "Markdown content of the page"),
                ),
                "gcu",
                required=2,
                detail="properties and parent",
            ),
            R(
                "database",
                "databases",
                s("database_id", "Database ID"),
                (
                    s("parent_page_id", "Page to create the database in"),
                    s("title", "Title"),
                    o("schema", "Property schema"),
                ),
                "gcu",
                required=3,
            ),
            R(
                "comment",
                "comments",
                s("comment_id", "Comment ID"),
                (s("page_id", "Page"), s("rich_text", "Comment text")),
                "lc",
                required=2,
                filters=("page_id",),
            ),
        ),
        (
            B(
                ("search",),
                "Search pages and databases by title across the workspace the integration can see.",
                (
                    s("query", "Text to look for in titles"),
                    s("filter", "Only pages or only databases", enum=("page", "database")),
                ),
                (),
            ),
            B(
                ("query", "database"),
                "Query a database with filters and sorts and return the matching pages.",
                (
                    s("database_id", "Database"),
                    o("filter", "Notion filter object"),
                    a("sorts", "Sort criteria", items="object"),
                ),
                ("database_id",),
            ),
            B(
                ("append", "block", "children"),
                "Append blocks (paragraphs, headings, to-dos) to a page.",
                (s("block_id", "Page or block to append to"), a("children", "Blocks to add", items="object")),
                ("block_id", "children"),
            ),
            B(
                ("get", "block", "children"),
                "Read the blocks inside a page or block.",
                (s("block_id", "Page or block"), i("page_size", "Blocks per page", default=100)),
                ("block_id",),
            ),
            B(("delete", "block"), "Archive a block or page.", (s("block_id", "Block"),), ("block_id",)),
        ),
    ),
    S(
        "confluence",
        "Confluence",
        "camel",
        "in a Confluence space",
        (s("space_key", "Key of the Confluence space"),),
        (
            R(
                "page",
                "pages",
                s("page_id", "Page ID"),
                (
                    s("title", "Page title"),
                    s("body", "Page body in storage format or Markdown"),
                    s("parent_id", "Parent page"),
                    i("version", "Current version number, needed to update"),
                ),
                "lgcuds",
                required=2,
                detail="body, version and ancestors",
            ),
            R(
                "space",
                "spaces",
                s("space_key", "Space key"),
                (s("type", "Space type", enum=("global", "personal")),),
                "lg",
                context=(),
                filters=("type",),
            ),
            R(
                "attachment",
                "attachments",
                s("attachment_id", "Attachment ID"),
                (s("page_id", "Page"), s("file_path", "Local file to attach")),
                "lcd",
                required=2,
                context=(),
            ),
        ),
        (
            B(
                ("search", "content", "cql"),
                "Search pages, blog posts and attachments with CQL.",
                (s("cql", "CQL query, e.g. text ~ 'runbook' and space = OPS"), i("limit", "Results", default=25)),
                ("cql",),
                context=False,
            ),
            B(
                ("get", "page", "children"),
                "List the child pages of a page.",
                (s("page_id", "Page"),),
                ("page_id",),
                context=False,
            ),
        ),
        page="offset",
    ),
    S(
        "postgres",
        "PostgreSQL",
        "snake",
        "in the PostgreSQL database",
        (),
        (
            R(
                "table",
                "tables",
                s("table", "Table name, optionally schema-qualified"),
                (s("schema", "Schema name", default="public"),),
                "lg",
                filters=("schema",),
                detail="columns, types, indexes and constraints",
            ),
            R("schema", "schemas", s("schema", "Schema name"), (), "l"),
        ),
        (
            B(
                ("query",),
                "Run a read-only SQL query and return the rows as JSON.",
                (
                    s("sql", "SELECT statement to run"),
                    a("params", "Positional parameters for $1, $2..."),
                    i("max_rows", "Row limit", default=1000),
                ),
                ("sql",),
            ),
            B(
                ("execute",),
                "Execute a SQL statement that changes data or schema (INSERT, UPDATE, DDL).",
                (s("sql", "Statement"), a("params", "Parameters")),
                ("sql",),
            ),
            B(
                ("explain", "query"),
                "Show the query plan PostgreSQL would use for a statement.",
                (s("sql", "Statement"), b("analyze", "Actually run it and report timings", default=False)),
                ("sql",),
            ),
            B(
                ("list", "indexes"),
                "List the indexes of a table with their definitions and sizes.",
                (s("table", "Table"),),
                ("table",),
            ),
            B(("get", "active", "connections"), "Show current sessions and what each is running.", ()),
        ),
    ),
    S(
        "mysql",
        "MySQL",
        "prefixed",
        "in the MySQL server",
        (DATABASE,),
        (
            R(
                "table",
                "tables",
                s("table", "Table name"),
                (s("like", "Only tables whose name matches this pattern"),),
                "lg",
                filters=("like",),
                detail="columns, keys and engine",
            ),
            R(
                "database",
                "databases",
                s("database", "Database name"),
                (s("charset", "Character set"),),
                "lcd",
                context=(),
            ),
            R(
                "user",
                "users",
                s("username", "MySQL account name"),
                (
                    s("username", "Account name"),
                    s("host", "Host the account connects from", default="%"),
                    s("password", "Password"),
                ),
                "lcd",
                required=3,
                context=(),
            ),
        ),
        (
            B(("query",), "Run a SELECT query and return the result rows.", (s("sql", "The SELECT query"),), ("sql",)),
            B(
                ("execute",),
                "Run an INSERT, UPDATE, DELETE or DDL statement; returns the affected row count.",
                (s("sql", "The statement"),),
                ("sql",),
            ),
            B(("show", "processlist"), "Show the threads currently running on the server.", (), context=False),
            B(
                ("export", "table", "csv"),
                "Export the rows of a table to a CSV file on disk.",
                (s("table", "Table"), s("path", "Output file path")),
                ("table", "path"),
            ),
        ),
        prefix="mysql",
    ),
    S(
        "sqlite",
        "SQLite",
        "snake",
        "in the SQLite database file",
        (s("db_path", "Path to the .db file"),),
        (
            R(
                "table",
                "tables",
                s("table_name", "Table"),
                (s("sql", "CREATE TABLE statement"),),
                "lgcd",
                detail="column names, types and primary key",
            ),
        ),
        (
            B(
                ("read", "query"),
                "Run a SELECT query against the SQLite database and return the rows.",
                (s("query", "SELECT statement"),),
                ("query",),
            ),
            B(
                ("write", "query"),
                "Run an INSERT, UPDATE or DELETE query against the SQLite database.",
                (s("query", "SQL statement"),),
                ("query",),
            ),
            B(
                ("append", "insight"),
                "Add a business insight to the memo kept alongside the database.",
                (s("insight", "The insight, one paragraph"),),
                ("insight",),
                context=False,
            ),
            B(("vacuum",), "Rebuild the database file to reclaim free space.", ()),
            B(
                ("backup", "database"),
                "Copy the database to a backup file while it stays online.",
                (s("destination", "Path of the backup file"),),
                ("destination",),
            ),
        ),
    ),
    S(
        "redis",
        "Redis",
        "prefixed",
        "in Redis",
        (i("db", "Logical database index", default=0),),
        (
            R(
                "key",
                "keys",
                s("key", "The key"),
                (s("pattern", "Glob-style pattern, e.g. user:*", default="*"),),
                "lgd",
                filters=("pattern",),
                detail="its type, TTL and value",
            ),
            R(
                "hash field",
                "hash fields",
                s("field", "Field name"),
                (s("key", "Hash key"), s("field", "Field"), s("value", "Value")),
                "lgd",
                required=2,
            ),
            R(
                "stream entry",
                "stream entries",
                s("entry_id", "Entry ID, e.g. 1526919030474-0"),
                (s("stream", "Stream key"), o("fields", "Field/value pairs")),
                "lc",
                required=2,
            ),
        ),
        (
            B(
                ("set",),
                "Set a string value, optionally with an expiry in seconds.",
                (s("key", "Key"), s("value", "Value"), i("expire_seconds", "Expire after this many seconds")),
                ("key", "value"),
            ),
            B(
                ("expire",),
                "Set a key's time to live in seconds.",
                (s("key", "Key"), i("seconds", "TTL")),
                ("key", "seconds"),
            ),
            B(
                ("publish",),
                "Publish a message on a pub/sub channel.",
                (s("channel", "Channel"), s("message", "Message")),
                ("channel", "message"),
            ),
            B(
                ("lpush",),
                "Push values onto the head of a list.",
                (s("key", "List key"), a("values", "Values to push")),
                ("key", "values"),
            ),
            B(
                ("info",),
                "Get server information and statistics: memory, clients, keyspace, replication.",
                (s("section", "Only this section", enum=("server", "memory", "clients", "keyspace", "replication")),),
            ),
            B(("flushdb",), "Delete every key of the current database.", (b("async", "Flush in the background"),)),
        ),
        prefix="redis",
    ),
    S(
        "mongodb",
        "MongoDB",
        "kebab",
        "in a MongoDB database",
        (s("database", "Database name"),),
        (
            R(
                "collection",
                "collections",
                s("collection", "Collection name"),
                (s("name", "Name of the collection"),),
                "lcd",
                detail="indexes and document count",
            ),
            R(
                "index",
                "indexes",
                s("index_name", "Index name"),
                (
                    s("collection", "Collection"),
                    o("keys", 'Index specification, e.g. {"email": 1}'),
                    b("unique", "Enforce uniqueness", default=False),
                ),
                "lcd",
                required=2,
            ),
        ),
        (
            B(
                ("find",),
                "Find documents in a collection that match a filter.",
                (
                    s("collection", "Collection"),
                    o("filter", "Query filter"),
                    o("projection", "Fields to return"),
                    o("sort", "Sort order"),
                    i("limit", "Maximum documents", default=10),
                ),
                ("collection",),
            ),
            B(
                ("aggregate",),
                "Run an aggregation pipeline on a collection.",
                (s("collection", "Collection"), a("pipeline", "Pipeline stages", items="object")),
                ("collection", "pipeline"),
            ),
            B(
                ("insert", "many"),
                "Insert documents into a collection.",
                (s("collection", "Collection"), a("documents", "Documents", items="object")),
                ("collection", "documents"),
            ),
            B(
                ("update", "many"),
                "Update every document that matches a filter.",
                (s("collection", "Collection"), o("filter", "Filter"), o("update", "Update operators")),
                ("collection", "filter", "update"),
            ),
            B(
                ("delete", "many"),
                "Delete every document that matches a filter.",
                (s("collection", "Collection"), o("filter", "Filter")),
                ("collection", "filter"),
            ),
            B(
                ("count",),
                "Count the documents matching a filter.",
                (s("collection", "Collection"), o("query", "Filter")),
                ("collection",),
            ),
            B(
                ("collection", "schema"),
                "Infer the schema of a collection from a sample of its documents.",
                (s("collection", "Collection"), i("sample_size", "Documents to sample", default=50)),
                ("collection",),
            ),
        ),
    ),
    S(
        "s3",
        "Amazon S3",
        "snake",
        "in an S3 bucket",
        (BUCKET,),
        (
            R(
                "object",
                "objects",
                s("key", "Object key (its path in the bucket)"),
                (
                    s("key", "Object key"),
                    s("body", "Content to upload"),
                    s("content_type", "MIME type"),
                    s("prefix", "Only keys starting with this prefix, like a folder"),
                ),
                "lgcd",
                filters=("prefix",),
                detail="size, ETag, storage class and last modified time",
            ),
            R("bucket", "buckets", s("bucket", "Bucket name"), (s("bucket", "Bucket name"), REGION), "lcd", context=()),
        ),
        (
            B(
                ("copy", "object"),
                "Copy an object to another key or bucket.",
                (
                    s("source_key", "Key to copy"),
                    s("destination_bucket", "Target bucket"),
                    s("destination_key", "Target key"),
                ),
                ("source_key", "destination_key"),
            ),
            B(
                ("generate", "presigned", "url"),
                "Create a time-limited URL that lets anyone download an object.",
                (s("key", "Object key"), i("expires_in", "Seconds the link stays valid", default=3600)),
                ("key",),
            ),
            B(
                ("download", "object", "to", "file"),
                "Download an object to a local file path.",
                (s("key", "Object key"), s("local_path", "Where to save it")),
                ("key", "local_path"),
            ),
            B(
                ("upload", "file"),
                "Upload a local file to the bucket.",
                (s("local_path", "File to upload"), s("key", "Destination key")),
                ("local_path", "key"),
            ),
            B(("get", "bucket", "policy"), "Get the access policy attached to the bucket.", ()),
        ),
        page="page_token",
    ),
    S(
        "gcs",
        "Google Cloud Storage",
        "dotted",
        "in a Cloud Storage bucket",
        (BUCKET,),
        (
            R(
                "object",
                "objects",
                s("object_name", "Name of the object"),
                (
                    s("object_name", "Name"),
                    s("content", "Data to write"),
                    s("prefix", "Filter by name prefix"),
                    s("delimiter", "Use '/' to list one folder level"),
                ),
                "lgcd",
                filters=("prefix", "delimiter"),
                detail="size, generation, CRC32C and update time",
            ),
            R(
                "bucket",
                "buckets",
                s("bucket", "Bucket"),
                (s("project", "GCP project"), s("location", "Location")),
                "lgcd",
                context=(),
            ),
        ),
        (
            B(
                ("objects", "compose"),
                "Concatenate several objects into one.",
                (a("source_objects", "Objects to join, in order"), s("destination", "New object name")),
                ("source_objects", "destination"),
            ),
            B(
                ("objects", "rewrite"),
                "Copy or move an object, optionally to another bucket or storage class.",
                (s("source", "Object"), s("destination", "New name"), s("destination_bucket", "Other bucket")),
                ("source", "destination"),
            ),
            B(
                ("objects", "signUrl"),
                "Create a signed URL for temporary access to an object.",
                (s("object_name", "Object"), i("minutes", "Validity in minutes", default=15)),
                ("object_name",),
            ),
        ),
        page="page_token",
    ),
    S(
        "kubernetes",
        "Kubernetes",
        "snake",
        "in the Kubernetes cluster",
        (NAMESPACE,),
        (
            R(
                "pod",
                "pods",
                s("name", "Pod name"),
                (
                    s("label_selector", "Label selector, e.g. app=web"),
                    s("field_selector", "Field selector, e.g. status.phase=Running"),
                ),
                "lgd",
                filters=("label_selector", "field_selector"),
                detail="containers, status, events and node",
            ),
            R(
                "deployment",
                "deployments",
                s("name", "Deployment name"),
                (
                    s("name", "Deployment name"),
                    s("image", "Container image"),
                    i("replicas", "Replica count", default=1),
                ),
                "lgcud",
                required=2,
            ),
            R(
                "service",
                "services",
                s("name", "Service name"),
                (s("label_selector", "Label selector"),),
                "lgd",
                filters=("label_selector",),
            ),
            R(
                "config map",
                "config maps",
                s("name", "ConfigMap name"),
                (s("name", "Name"), o("data", "Key/value data")),
                "lgcud",
                required=2,
            ),
            R(
                "secret",
                "secrets",
                s("name", "Secret name"),
                (s("name", "Name"), o("string_data", "Values, unencoded")),
                "lgcd",
                required=2,
            ),
            R(
                "namespace",
                "namespaces",
                s("name", "Namespace"),
                (s("name", "Name of the namespace"),),
                "lcd",
                context=(),
            ),
            R(
                "node",
                "nodes",
                s("name", "Node name"),
                (s("label_selector", "Label selector"),),
                "lg",
                context=(),
                filters=("label_selector",),
                detail="capacity, allocatable resources, conditions and taints",
            ),
            R(
                "job",
                "jobs",
                s("name", "Job name"),
                (s("name", "Name"), s("image", "Image"), a("command", "Command")),
                "lgcd",
                required=2,
            ),
        ),
        (
            B(
                ("get", "pod", "logs"),
                "Get the logs of a container in a pod.",
                (
                    s("pod", "Pod name"),
                    s("container", "Container; the only one if omitted"),
                    i("tail_lines", "Only the last N lines"),
                    b("previous", "Logs of the previous, crashed instance"),
                ),
                ("pod",),
            ),
            B(
                ("exec", "in", "pod"),
                "Run a command in a running container and return its output.",
                (s("pod", "Pod"), a("command", "Command and arguments"), s("container", "Container")),
                ("pod", "command"),
            ),
            B(
                ("apply", "manifest"),
                "Create or update resources from a YAML manifest, like kubectl apply.",
                (s("manifest", "YAML, may contain several documents"),),
                ("manifest",),
            ),
            B(
                ("scale", "deployment"),
                "Change the number of replicas of a deployment.",
                (s("name", "Deployment"), i("replicas", "New replica count")),
                ("name", "replicas"),
            ),
            B(
                ("rollout", "restart"),
                "Restart the pods of a deployment one by one.",
                (s("name", "Deployment"),),
                ("name",),
            ),
            B(
                ("list", "events"),
                "List recent cluster events, warnings first.",
                (s("involved_object", "Only events about this object"),),
            ),
            B(
                ("port", "forward"),
                "Forward a local port to a port of a pod.",
                (s("pod", "Pod"), i("local_port", "Local port"), i("pod_port", "Pod port")),
                ("pod", "pod_port"),
            ),
            B(
                ("get", "current", "context"),
                "Show which kubeconfig context and cluster are in use.",
                (),
                context=False,
            ),
        ),
    ),
    S(
        "docker",
        "Docker",
        "kebab",
        "on the Docker host",
        (),
        (
            R(
                "container",
                "containers",
                s("container_id", "Container ID or name"),
                (
                    s("image", "Image to run"),
                    s("name", "Container name"),
                    a("ports", "Port mappings like 8080:80"),
                    o("environment", "Environment variables"),
                    b("all", "Include stopped containers", default=False),
                ),
                "lgcd",
                filters=("all",),
                detail="state, mounts, network settings and health",
            ),
            R(
                "image",
                "images",
                s("image", "Image name or ID"),
                (s("reference", "Filter by reference"),),
                "lgd",
                filters=("reference",),
            ),
            R(
                "volume",
                "volumes",
                s("volume_name", "Volume name"),
                (s("name", "Volume name"), s("driver", "Driver")),
                "lcd",
            ),
            R("network", "networks", s("network_id", "Network"), (s("name", "Name"), s("driver", "Driver")), "lcd"),
        ),
        (
            B(
                ("fetch", "container", "logs"),
                "Fetch the logs of a container.",
                (
                    s("container_id", "Container"),
                    i("tail", "Number of lines from the end", default=100),
                    s("since", "Only logs since this time"),
                ),
                ("container_id",),
            ),
            B(("pull", "image"), "Pull an image from a registry.", (s("image", "Image reference"),), ("image",)),
            B(
                ("build", "image"),
                "Build an image from a Dockerfile in a directory.",
                (
                    s("context_path", "Build context directory"),
                    s("tag", "Tag for the image"),
                    s("dockerfile", "Dockerfile path", default="Dockerfile"),
                ),
                ("context_path",),
            ),
            B(
                ("start", "container"),
                "Start a stopped container.",
                (s("container_id", "Container"),),
                ("container_id",),
            ),
            B(("stop", "container"), "Stop a running container.", (s("container_id", "Container"),), ("container_id",)),
            B(
                ("exec", "command"),
                "Run a command inside a running container.",
                (s("container_id", "Container"), s("command", "Command line")),
                ("container_id", "command"),
            ),
            B(
                ("copy", "file", "from", "container"),
                "Copy a file or directory out of a container to the host.",
                (
                    s("container_id", "Container"),
                    s("source_path", "Path in the container"),
                    s("destination_path", "Host path"),
                ),
                ("container_id", "source_path", "destination_path"),
            ),
        ),
    ),
    S(
        "aws-ec2",
        "Amazon EC2",
        "dotted",
        "in the AWS account",
        (REGION,),
        (
            R(
                "instance",
                "instances",
                s("instance_id", "Instance ID, i-..."),
                (
                    s("image_id", "AMI ID"),
                    s("instance_type", "Instance type", default="t3.micro"),
                    s("key_name", "SSH key pair name"),
                    a("security_group_ids", "Security groups"),
                    s("state", "Filter by state", enum=("pending", "running", "stopped", "terminated")),
                ),
                "lgcd",
                required=2,
                filters=("state",),
                detail="state, IPs, tags and launch time",
            ),
            R(
                "security group",
                "security groups",
                s("group_id", "Security group ID"),
                (s("group_name", "Name"), s("description", "Description"), s("vpc_id", "VPC")),
                "lgcd",
                required=2,
            ),
            R(
                "volume",
                "volumes",
                s("volume_id", "EBS volume ID"),
                (i("size_gib", "Size in GiB"), s("availability_zone", "Zone"), s("volume_type", "Type", default="gp3")),
                "lgcd",
                required=2,
            ),
            R("snapshot", "snapshots", s("snapshot_id", "Snapshot ID"), (s("volume_id", "Volume to snapshot"),), "lcd"),
            R("key pair", "key pairs", s("key_name", "Key pair name"), (s("key_name", "Name"),), "lcd"),
        ),
        (
            B(("instances", "start"), "Start stopped instances.", (a("instance_ids", "Instances"),), ("instance_ids",)),
            B(
                ("instances", "stop"),
                "Stop running instances.",
                (a("instance_ids", "Instances"), b("force", "Force stop", default=False)),
                ("instance_ids",),
            ),
            B(("instances", "reboot"), "Reboot instances.", (a("instance_ids", "Instances"),), ("instance_ids",)),
            B(
                ("console", "getOutput"),
                "Get the console output of an instance, useful when it will not boot.",
                (s("instance_id", "Instance"),),
                ("instance_id",),
            ),
        ),
        page="page_token",
    ),
    S(
        "stripe",
        "Stripe",
        "snake",
        "in the Stripe account",
        (),
        (
            R(
                "customer",
                "customers",
                s("customer", "Customer ID, cus_..."),
                (
                    s("email", "Email"),
                    s("name", "Full name"),
                    s("description", "Internal note"),
                    o("metadata", "Metadata"),
                ),
                "lgcuds",
                filters=("email",),
                detail="default payment method, balance and metadata",
            ),
            R(
                "payment intent",
                "payment intents",
                s("payment_intent", "PaymentIntent ID"),
                (
                    i("amount", "Amount in the smallest currency unit"),
                    s("currency", "Three-letter ISO code", default="usd"),
                    s("customer", "Customer"),
                ),
                "lgc",
                required=2,
                filters=("customer",),
            ),
            R(
                "invoice",
                "invoices",
                s("invoice", "Invoice ID"),
                (
                    s("customer", "Customer"),
                    s("status", "Status", enum=("draft", "open", "paid", "void", "uncollectible")),
                    i("days_until_due", "Days until due"),
                ),
                "lgcd",
                filters=("customer", "status"),
            ),
            R(
                "product",
                "products",
                s("product", "Product ID"),
                (s("name", "Product name"), s("description", "Description"), b("active", "Only active products")),
                "lgcud",
                filters=("active",),
            ),
            R(
                "price",
                "prices",
                s("price", "Price ID"),
                (
                    s("product", "Product"),
                    i("unit_amount", "Amount in cents"),
                    s("currency", "Currency"),
                    s("interval", "Billing interval", enum=("day", "week", "month", "year")),
                ),
                "lgc",
                required=3,
            ),
            R(
                "subscription",
                "subscriptions",
                s("subscription", "Subscription ID"),
                (
                    s("customer", "Customer"),
                    s("price", "Price to subscribe to"),
                    s("status", "Status", enum=("active", "past_due", "canceled", "trialing", "all")),
                ),
                "lgcud",
                required=2,
                filters=("customer", "status"),
            ),
            R(
                "refund",
                "refunds",
                s("refund", "Refund ID"),
                (s("payment_intent", "PaymentIntent to refund"), i("amount", "Amount; the full amount if omitted")),
                "lgc",
            ),
        ),
        (
            B(("retrieve", "balance"), "Retrieve the account's current balance, available and pending.", ()),
            B(
                ("create", "payment", "link"),
                "Create a shareable payment link for a price.",
                (s("price", "Price"), i("quantity", "Quantity", default=1)),
                ("price",),
            ),
            B(
                ("finalize", "invoice"),
                "Finalize a draft invoice so it can be paid.",
                (s("invoice", "Invoice"),),
                ("invoice",),
            ),
        ),
        verbs=(("g", "retrieve"),),
        page="cursor",
    ),
    S(
        "shopify",
        "Shopify",
        "prefixed",
        "in the Shopify store",
        (),
        (
            R(
                "product",
                "products",
                i("product_id", "Product ID"),
                (
                    s("title", "Title"),
                    s("body_html", "Description HTML"),
                    s("vendor", "Vendor"),
                    s("product_type", "Type"),
                    s("status", "Status", enum=("active", "draft", "archived")),
                ),
                "lgcuds",
                filters=("status", "vendor"),
            ),
            R(
                "order",
                "orders",
                i("order_id", "Order ID"),
                (
                    s("status", "Status", enum=("open", "closed", "cancelled", "any")),
                    s("created_at_min", "Since date"),
                    s("financial_status", "Payment state"),
                ),
                "lgu",
                filters=("status", "created_at_min", "financial_status"),
                detail="line items, customer, shipping and fulfillments",
            ),
            R(
                "customer",
                "customers",
                i("customer_id", "Customer ID"),
                (s("email", "Email"), s("first_name", "First name"), s("last_name", "Last name"), s("phone", "Phone")),
                "lgcus",
            ),
            R("collection", "collections", i("collection_id", "Collection ID"), (s("title", "Title"),), "lgc"),
            R(
                "discount code",
                "discount codes",
                i("discount_code_id", "ID"),
                (i("price_rule_id", "Price rule"), s("code", "The code customers type")),
                "lcd",
                required=2,
            ),
        ),
        (
            B(
                ("adjust", "inventory"),
                "Change the available quantity of an inventory item at a location.",
                (i("inventory_item_id", "Item"), i("location_id", "Location"), i("delta", "Change, may be negative")),
                ("inventory_item_id", "location_id", "delta"),
            ),
            B(
                ("fulfill", "order"),
                "Mark an order's items as fulfilled and add tracking.",
                (i("order_id", "Order"), s("tracking_number", "Tracking number"), s("tracking_company", "Carrier")),
                ("order_id",),
            ),
            B(
                ("cancel", "order"),
                "Cancel an order and optionally refund and restock it.",
                (
                    i("order_id", "Order"),
                    b("restock", "Restock items", default=True),
                    s("reason", "Reason", enum=("customer", "fraud", "inventory", "declined", "other")),
                ),
                ("order_id",),
            ),
        ),
        prefix="shopify",
        page="page",
    ),
    S(
        "salesforce",
        "Salesforce",
        "camel",
        "in Salesforce",
        (),
        (
            R(
                "record",
                "records",
                s("record_id", "18-character record ID"),
                (s("sobject", "Object type such as Account, Contact, Opportunity"), o("fields", "Field values")),
                "gcud",
                required=2,
                detail="every field of the record",
            ),
            R(
                "object",
                "objects",
                s("sobject", "API name of the object"),
                (),
                "lg",
                detail="fields, their types, picklist values and relationships",
            ),
        ),
        (
            B(
                ("run", "soql", "query"),
                "Run a SOQL query and return the records.",
                (s("query", "SOQL, e.g. SELECT Id, Name FROM Account LIMIT 10"),),
                ("query",),
            ),
            B(
                ("search", "sosl"),
                "Full-text search across objects with SOSL.",
                (s("search", "SOSL search string"),),
                ("search",),
            ),
            B(
                ("describe", "object"),
                "Describe an object's fields and relationships.",
                (s("sobject", "Object"),),
                ("sobject",),
            ),
            B(
                ("upsert", "record"),
                "Insert or update a record by an external ID field.",
                (
                    s("sobject", "Object"),
                    s("external_id_field", "Field"),
                    s("external_id", "Value"),
                    o("fields", "Values"),
                ),
                ("sobject", "external_id_field", "external_id", "fields"),
            ),
            B(("get", "user", "info"), "Get the identity of the connected Salesforce user and org.", ()),
        ),
    ),
    S(
        "hubspot",
        "HubSpot",
        "camel",
        "in HubSpot CRM",
        (),
        (
            R(
                "contact",
                "contacts",
                s("contact_id", "Contact ID"),
                (
                    s("email", "Email"),
                    s("firstname", "First name"),
                    s("lastname", "Last name"),
                    s("company", "Company"),
                    s("phone", "Phone"),
                ),
                "lgcuds",
                detail="properties and associations",
            ),
            R(
                "company",
                "companies",
                s("company_id", "Company ID"),
                (s("name", "Company name"), s("domain", "Website domain"), s("industry", "Industry")),
                "lgcuds",
            ),
            R(
                "deal",
                "deals",
                s("deal_id", "Deal ID"),
                (
                    s("dealname", "Deal name"),
                    s("dealstage", "Pipeline stage"),
                    num("amount", "Amount"),
                    s("closedate", "Expected close date"),
                ),
                "lgcuds",
                required=2,
            ),
            R(
                "ticket",
                "tickets",
                s("ticket_id", "Ticket ID"),
                (s("subject", "Subject"), s("content", "Description"), s("hs_pipeline_stage", "Stage")),
                "lgcud",
            ),
            R(
                "note",
                "notes",
                s("note_id", "Note ID"),
                (s("body", "Note text"), s("contact_id", "Contact to attach to")),
                "lgcd",
            ),
        ),
        (
            B(
                ("create", "association"),
                "Associate two CRM records, e.g. a contact with a company.",
                (
                    s("from_object_type", "Type"),
                    s("from_object_id", "ID"),
                    s("to_object_type", "Type"),
                    s("to_object_id", "ID"),
                ),
                ("from_object_type", "from_object_id", "to_object_type", "to_object_id"),
            ),
            B(("list", "owners"), "List the users who can own records.", ()),
        ),
        verbs=(("d", "archive"),),
        page="cursor",
    ),
    S(
        "zendesk",
        "Zendesk",
        "kebab",
        "in Zendesk Support",
        (),
        (
            R(
                "ticket",
                "tickets",
                i("ticket_id", "Ticket ID"),
                (
                    s("subject", "Subject"),
                    s("comment", "First comment or reply"),
                    s("status", "Status", enum=("new", "open", "pending", "hold", "solved", "closed")),
                    s("priority", "Priority", enum=("low", "normal", "high", "urgent")),
                    i("assignee_id", "Agent"),
                ),
                "lgcuds",
                required=2,
                filters=("status",),
                detail="comments, requester, tags and SLA",
            ),
            R(
                "user",
                "users",
                i("user_id", "User ID"),
                (s("name", "Name"), s("email", "Email"), s("role", "Role", enum=("end-user", "agent", "admin"))),
                "lgcs",
                filters=("role",),
            ),
            R("macro", "macros", i("macro_id", "Macro ID"), (), "lg"),
            R(
                "article",
                "articles",
                i("article_id", "Help Center article ID"),
                (s("title", "Title"), s("body", "HTML body"), i("section_id", "Section")),
                "lgcus",
                required=3,
            ),
        ),
        (
            B(
                ("add", "ticket", "comment"),
                "Reply on a ticket, publicly or as an internal note.",
                (i("ticket_id", "Ticket"), s("body", "Text"), b("public", "Visible to the requester", default=True)),
                ("ticket_id", "body"),
            ),
            B(
                ("apply", "macro"),
                "Apply a macro to a ticket.",
                (i("ticket_id", "Ticket"), i("macro_id", "Macro")),
                ("ticket_id", "macro_id"),
            ),
            B(
                ("merge", "tickets"),
                "Merge tickets into a target ticket.",
                (i("target_id", "Ticket to keep"), a("source_ids", "Tickets to merge", items="integer")),
                ("target_id", "source_ids"),
            ),
        ),
        page="page",
    ),
    S(
        "twilio",
        "Twilio",
        "kebab",
        "in the Twilio account",
        (),
        (
            R(
                "message",
                "messages",
                s("message_sid", "Message SID"),
                (
                    s("to", "Destination phone number, E.164"),
                    s("from", "Twilio number or messaging service"),
                    s("body", "Text of the SMS"),
                    s("date_sent", "Only messages sent on this date"),
                ),
                "lgd",
                filters=("to", "from", "date_sent"),
                detail="status, price and error code",
            ),
            R(
                "call",
                "calls",
                s("call_sid", "Call SID"),
                (s("status", "Status", enum=("queued", "ringing", "in-progress", "completed")),),
                "lg",
                filters=("status",),
            ),
            R(
                "phone number",
                "phone numbers",
                s("phone_number_sid", "Number SID"),
                (s("friendly_name", "Label"),),
                "lgud",
            ),
        ),
        (
            B(
                ("send", "sms"),
                "Send a text message (SMS) to a phone number.",
                (s("to", "E.164 number"), s("body", "Message text"), s("media_url", "Image to send as MMS")),
                ("to", "body"),
            ),
            B(
                ("make", "call"),
                "Place an outbound voice call that plays TwiML.",
                (s("to", "Number to call"), s("twiml", "TwiML instructions, e.g. <Say>Hello</Say>")),
                ("to", "twiml"),
            ),
            B(
                ("lookup", "phone", "number"),
                "Look up carrier and caller name for a phone number.",
                (s("phone_number", "Number"),),
                ("phone_number",),
            ),
        ),
        page="page_token",
    ),
    S(
        "sendgrid",
        "SendGrid",
        "prefixed",
        "in SendGrid",
        (),
        (
            R(
                "template",
                "templates",
                s("template_id", "Dynamic template ID"),
                (s("name", "Template name"), s("subject", "Subject"), s("html_content", "HTML")),
                "lgcud",
            ),
            R(
                "contact",
                "contacts",
                s("contact_id", "Contact ID"),
                (s("email", "Email"), s("first_name", "First name"), a("list_ids", "Lists to add the contact to")),
                "lgcds",
            ),
            R("contact list", "contact lists", s("list_id", "List ID"), (s("name", "List name"),), "lgcd"),
        ),
        (
            B(
                ("send", "mail"),
                "Send an email through SendGrid, optionally from a dynamic template.",
                (
                    s("to", "Recipient"),
                    s("from_email", "Verified sender"),
                    s("subject", "Subject"),
                    s("text", "Body"),
                    s("template_id", "Template"),
                    o("dynamic_data", "Template data"),
                ),
                ("to", "from_email"),
            ),
            B(
                ("get", "stats"),
                "Get delivery, open and click statistics for a date range.",
                (
                    s("start_date", "YYYY-MM-DD"),
                    s("end_date", "YYYY-MM-DD"),
                    s("aggregated_by", "Bucket", enum=("day", "week", "month")),
                ),
                ("start_date",),
            ),
        ),
        prefix="sendgrid",
    ),
    S(
        "figma",
        "Figma",
        "camel",
        "in Figma",
        (),
        (
            R(
                "comment",
                "comments",
                s("comment_id", "Comment ID"),
                (s("file_key", "File"), s("message", "Comment text"), o("client_meta", "Where to pin it")),
                "lcd",
                required=2,
                filters=("file_key",),
            ),
            R("project", "projects", s("project_id", "Project ID"), (s("team_id", "Team"),), "l", filters=("team_id",)),
            R(
                "component",
                "components",
                s("key", "Component key"),
                (s("team_id", "Team library"),),
                "lg",
                filters=("team_id",),
            ),
        ),
        (
            B(
                ("get", "file"),
                "Get a Figma file's document tree: pages, frames and layers.",
                (s("file_key", "Key from the file's URL"), i("depth", "How deep to traverse")),
                ("file_key",),
            ),
            B(
                ("get", "file", "nodes"),
                "Get specific nodes of a file by their IDs.",
                (s("file_key", "File"), a("ids", "Node IDs")),
                ("file_key", "ids"),
            ),
            B(
                ("export", "images"),
                "Render nodes as PNG, JPG, SVG or PDF and return download URLs.",
                (
                    s("file_key", "File"),
                    a("ids", "Node IDs"),
                    s("format", "Format", enum=("png", "jpg", "svg", "pdf")),
                    num("scale", "Scale 0.01 to 4", default=1),
                ),
                ("file_key", "ids"),
            ),
            B(
                ("list", "project", "files"),
                "List the files in a Figma project.",
                (s("project_id", "Project"),),
                ("project_id",),
            ),
            B(
                ("get", "file", "versions"),
                "List the version history of a file.",
                (s("file_key", "File"),),
                ("file_key",),
            ),
            B(
                ("get", "styles"),
                "List the published colour, text and effect styles of a file.",
                (s("file_key", "File"),),
                ("file_key",),
            ),
        ),
    ),
    S(
        "sentry",
        "Sentry",
        "snake",
        "in Sentry",
        (s("organization_slug", "Organization slug"),),
        (
            R(
                "issue",
                "issues",
                s("issue_id", "Issue ID"),
                (
                    s("project", "Project slug"),
                    s("query", "Sentry search, e.g. is:unresolved level:error"),
                    s("status", "Status", enum=("resolved", "unresolved", "ignored")),
                ),
                "lgu",
                filters=("project", "query"),
                detail="latest event, stack trace and tags",
            ),
            R(
                "project",
                "projects",
                s("project_slug", "Project slug"),
                (s("name", "Name"), s("platform", "Platform")),
                "lgc",
            ),
            R(
                "release",
                "releases",
                s("version", "Release version"),
                (s("version", "Version string"), a("projects", "Projects it belongs to")),
                "lgc",
                required=2,
            ),
            R(
                "event",
                "events",
                s("event_id", "Event ID"),
                (s("issue_id", "Issue"),),
                "lg",
                filters=("issue_id",),
                detail="stack trace, breadcrumbs, request and tags",
            ),
        ),
        (
            B(
                ("resolve", "issue"),
                "Mark an issue as resolved, optionally in the next release.",
                (s("issue_id", "Issue"), b("in_next_release", "Resolve in next release", default=False)),
                ("issue_id",),
            ),
            B(
                ("get", "stacktrace"),
                "Get the stack trace of the latest event of an issue, frame by frame.",
                (s("issue_id", "Issue"),),
                ("issue_id",),
            ),
            B(
                ("create", "dsn"),
                "Create a client key (DSN) for a project.",
                (s("project_slug", "Project"),),
                ("project_slug",),
            ),
        ),
    ),
    S(
        "datadog",
        "Datadog",
        "dotted",
        "in Datadog",
        (),
        (
            R(
                "monitor",
                "monitors",
                i("monitor_id", "Monitor ID"),
                (
                    s("name", "Name"),
                    s("type", "Type", enum=("metric alert", "query alert", "log alert", "service check")),
                    s("query", "Monitor query"),
                    s("message", "Notification message with @mentions"),
                ),
                "lgcuds",
                required=3,
                detail="state, thresholds and notification targets",
            ),
            R(
                "dashboard",
                "dashboards",
                s("dashboard_id", "Dashboard ID"),
                (
                    s("title", "Title"),
                    a("widgets", "Widgets", items="object"),
                    s("layout_type", "Layout", enum=("ordered", "free")),
                ),
                "lgcud",
                required=3,
            ),
            R(
                "incident",
                "incidents",
                s("incident_id", "Incident ID"),
                (s("title", "Title"), s("severity", "Severity", enum=("SEV-1", "SEV-2", "SEV-3", "SEV-4"))),
                "lgcu",
            ),
            R(
                "downtime",
                "downtimes",
                s("downtime_id", "Downtime ID"),
                (a("scope", "Scope tags"), i("start", "Start, Unix time"), i("end", "End, Unix time")),
                "lcd",
            ),
        ),
        (
            B(
                ("metrics", "query"),
                "Query timeseries points of a metric over a time range.",
                (
                    s("query", "Metric query, e.g. avg:system.cpu.user{host:web-1}"),
                    i("from", "Start, Unix seconds"),
                    i("to", "End, Unix seconds"),
                ),
                ("query", "from", "to"),
            ),
            B(
                ("logs", "search"),
                "Search logs with the Datadog log query syntax.",
                (
                    s("query", "Log query, e.g. service:api status:error"),
                    s("from", "Start, e.g. now-15m"),
                    s("to", "End", default="now"),
                    i("limit", "Logs", default=50),
                ),
                ("query",),
            ),
            B(
                ("events", "post"),
                "Post an event to the event stream.",
                (s("title", "Title"), s("text", "Body"), a("tags", "Tags")),
                ("title", "text"),
            ),
            B(
                ("hosts", "list"),
                "List hosts reporting to Datadog with their tags and metrics.",
                (s("filter", "Filter string"),),
            ),
            B(("traces", "search"), "Search APM spans.", (s("query", "Span query"), s("from", "Start")), ("query",)),
        ),
    ),
    S(
        "pagerduty",
        "PagerDuty",
        "kebab",
        "in PagerDuty",
        (),
        (
            R(
                "incident",
                "incidents",
                s("incident_id", "Incident ID"),
                (
                    s("title", "Title"),
                    s("service_id", "Service"),
                    s("urgency", "Urgency", enum=("high", "low")),
                    s("status", "Status", enum=("triggered", "acknowledged", "resolved")),
                ),
                "lgcu",
                required=2,
                filters=("status", "service_id", "urgency"),
                detail="timeline, assignments and alerts",
            ),
            R(
                "service",
                "services",
                s("service_id", "Service ID"),
                (s("name", "Name"), s("escalation_policy_id", "Escalation policy")),
                "lgcd",
                required=2,
            ),
            R(
                "schedule",
                "schedules",
                s("schedule_id", "Schedule ID"),
                (s("query", "Filter by name"),),
                "lg",
                filters=("query",),
            ),
            R("escalation policy", "escalation policies", s("policy_id", "Policy ID"), (), "lg"),
        ),
        (
            B(
                ("list", "oncalls"),
                "Who is on call now, per schedule and escalation level.",
                (a("schedule_ids", "Only these schedules"), s("since", "Start of the window"), s("until", "End")),
            ),
            B(
                ("acknowledge", "incident"),
                "Acknowledge an incident so it stops escalating.",
                (s("incident_id", "Incident"),),
                ("incident_id",),
            ),
            B(
                ("resolve", "incident"),
                "Resolve an incident.",
                (s("incident_id", "Incident"), s("resolution", "Note")),
                ("incident_id",),
            ),
            B(
                ("add", "incident", "note"),
                "Add a note to an incident's timeline.",
                (s("incident_id", "Incident"), s("content", "Note")),
                ("incident_id", "content"),
            ),
        ),
        page="offset",
    ),
    S(
        "weather",
        "the weather service",
        "snake",
        "",
        (),
        (),
        (
            B(
                ("get", "current", "weather"),
                "Get the current conditions for a city or coordinates: temperature, wind,"
                " humidity and a short summary.",
                (
                    s("location", "City name or 'lat,lon'"),
                    s("units", "Units", enum=("metric", "imperial"), default="metric"),
                ),
                ("location",),
                output=(
                    num("temperature", "Temperature"),
                    num("humidity", "Relative humidity, percent"),
                    s("conditions", "Summary such as 'light rain'"),
                ),
            ),
            B(
                ("get", "forecast"),
                "Get the daily forecast for the next days.",
                (
                    s("location", "City or coordinates"),
                    i("days", "Days ahead, 1-16", default=7),
                    s("units", "Units", enum=("metric", "imperial"), default="metric"),
                ),
                ("location",),
            ),
            B(
                ("get", "hourly", "forecast"),
                "Hour-by-hour forecast for the next 48 hours.",
                (s("location", "City or coordinates"),),
                ("location",),
            ),
            B(
                ("get", "alerts"),
                "Active severe-weather alerts for a US state or area.",
                (s("area", "Two-letter state code"),),
                ("area",),
            ),
            B(
                ("get", "air", "quality"),
                "Air quality index and pollutant levels at a location.",
                (num("latitude", "Latitude"), num("longitude", "Longitude")),
                ("latitude", "longitude"),
            ),
            B(
                ("get", "historical", "weather"),
                "Observed weather on a past date.",
                (s("location", "Location"), s("date", "YYYY-MM-DD")),
                ("location", "date"),
            ),
            B(
                ("get", "sunrise", "sunset"),
                "Sunrise and sunset times for a place and date, in local time.",
                (s("location", "Location"), s("date", "YYYY-MM-DD; today if omitted")),
                ("location",),
            ),
        ),
    ),
    S(
        "maps",
        "Google Maps",
        "camel",
        "",
        (),
        (
            R(
                "place",
                "places",
                s("place_id", "Place ID"),
                (
                    s("query", "What to look for, e.g. 'coffee near Union Square'"),
                    s("location", "Bias to 'lat,lng'"),
                    i("radius", "Radius in metres"),
                ),
                "gs",
                detail="address, opening hours, rating and phone",
            ),
        ),
        (
            B(
                ("geocode",),
                "Turn an address into latitude and longitude.",
                (s("address", "Street address"),),
                ("address",),
                output=(num("lat", "Latitude"), num("lng", "Longitude"), s("formatted_address", "Address")),
            ),
            B(
                ("reverse", "geocode"),
                "Turn coordinates into a street address.",
                (num("latitude", "Latitude"), num("longitude", "Longitude")),
                ("latitude", "longitude"),
            ),
            B(
                ("get", "directions"),
                "Route between two places by car, transit, bicycle or on foot.",
                (
                    s("origin", "From"),
                    s("destination", "To"),
                    s("mode", "Travel mode", enum=("driving", "walking", "bicycling", "transit"), default="driving"),
                    s("departure_time", "When to leave"),
                ),
                ("origin", "destination"),
            ),
            B(
                ("distance", "matrix"),
                "Travel distance and time between many origins and destinations.",
                (a("origins", "Origins"), a("destinations", "Destinations")),
                ("origins", "destinations"),
            ),
            B(
                ("get", "elevation"),
                "Elevation above sea level at points.",
                (a("locations", "'lat,lng' strings"),),
                ("locations",),
            ),
            B(
                ("get", "time", "zone"),
                "Which time zone a latitude/longitude is in, with its UTC and DST offsets.",
                (s("location", "'lat,lng'"), i("timestamp", "Unix time to evaluate DST at")),
                ("location",),
            ),
        ),
    ),
    S(
        "translate",
        "the translation service",
        "kebab",
        "",
        (),
        (
            R(
                "glossary",
                "glossaries",
                s("glossary_id", "Glossary ID"),
                (
                    s("name", "Name"),
                    s("source_language", "Source language"),
                    s("target_language", "Target language"),
                    o("entries", "Term pairs"),
                ),
                "lgcd",
                required=3,
            ),
        ),
        (
            B(
                ("translate", "text"),
                "Translate text into another language.",
                (
                    s("text", "Text to translate"),
                    s("target_language", "Target language code, e.g. de"),
                    s("source_language", "Source language; detected if omitted"),
                    s("formality", "Tone", enum=("default", "more", "less")),
                ),
                ("text", "target_language"),
            ),
            B(
                ("detect", "language"),
                "Detect the language of a piece of text.",
                (s("text", "Text"),),
                ("text",),
                output=(s("language", "ISO 639-1 code"), num("confidence", "0 to 1")),
            ),
            B(("list", "languages"), "List supported languages and their codes.", ()),
            B(
                ("translate", "document"),
                "Translate a document file (DOCX, PPTX, PDF) keeping its layout.",
                (
                    s("file_path", "Document to translate"),
                    s("target_language", "Language"),
                    s("output_path", "Where to write the result"),
                ),
                ("file_path", "target_language"),
            ),
            B(
                ("transliterate",),
                "Convert text from one script to another, e.g. Cyrillic to Latin.",
                (s("text", "Text"), s("from_script", "Script"), s("to_script", "Script")),
                ("text", "to_script"),
            ),
        ),
    ),
    S(
        "youtube",
        "YouTube",
        "snake",
        "on YouTube",
        (),
        (
            R(
                "video",
                "videos",
                s("video_id", "Video ID"),
                (
                    s("query", "Search terms"),
                    s("channel_id", "Only this channel"),
                    s("order", "Sort", enum=("relevance", "date", "viewCount", "rating")),
                    i("max_results", "Results"),
                ),
                "gs",
                detail="title, description, duration and statistics",
            ),
            R(
                "playlist",
                "playlists",
                s("playlist_id", "Playlist ID"),
                (
                    s("title", "Title"),
                    s("description", "Description"),
                    s("privacy_status", "Privacy", enum=("public", "unlisted", "private")),
                ),
                "lgcd",
            ),
            R("channel", "channels", s("channel_id", "Channel ID"), (s("for_username", "Legacy username"),), "g"),
            R(
                "comment thread",
                "comment threads",
                s("comment_thread_id", "Thread ID"),
                (s("video_id", "Video"), s("text", "Comment text")),
                "lc",
                required=2,
                filters=("video_id",),
            ),
        ),
        (
            B(
                ("get", "transcript"),
                "Get the captions of a video as plain text with timestamps.",
                (s("video_id", "Video"), s("language", "Caption language", default="en")),
                ("video_id",),
            ),
            B(
                ("add", "video", "to", "playlist"),
                "Add a video to a playlist.",
                (s("playlist_id", "Playlist"), s("video_id", "Video")),
                ("playlist_id", "video_id"),
            ),
            B(
                ("download", "audio"),
                "Download the audio track of a video to a file.",
                (s("url", "Video URL"), s("output_dir", "Directory to save into")),
                ("url",),
            ),
        ),
        page="page_token",
    ),
    S(
        "spotify",
        "Spotify",
        "camel",
        "on Spotify",
        (),
        (
            R(
                "playlist",
                "playlists",
                s("playlist_id", "Playlist ID"),
                (s("name", "Name"), s("description", "Description"), b("public", "Public", default=True)),
                "lgcu",
            ),
            R("track", "tracks", s("track_id", "Track ID"), (s("query", "Song, artist or album"),), "gs"),
            R("album", "albums", s("album_id", "Album ID"), (), "g"),
            R("artist", "artists", s("artist_id", "Artist ID"), (), "g"),
        ),
        (
            B(
                ("start", "playback"),
                "Play a track, album or playlist on the active device.",
                (s("uri", "Spotify URI"), s("device_id", "Device")),
            ),
            B(("pause", "playback"), "Pause playback.", (s("device_id", "Device"),)),
            B(("skip", "to", "next"), "Skip to the next track.", ()),
            B(("get", "currently", "playing"), "What is playing right now, with progress in the track.", ()),
            B(("add", "to", "queue"), "Add a track to the playback queue.", (s("uri", "Track URI"),), ("uri",)),
            B(
                ("add", "tracks", "to", "playlist"),
                "Add tracks to a playlist.",
                (s("playlist_id", "Playlist"), a("uris", "Track URIs")),
                ("playlist_id", "uris"),
            ),
            B(("get", "recently", "played"), "Tracks the user played recently.", (i("limit", "How many", default=20),)),
            B(
                ("get", "recommendations"),
                "Recommend tracks similar to seed tracks, artists or genres.",
                (a("seed_tracks", "Track IDs"), a("seed_artists", "Artist IDs"), a("seed_genres", "Genres")),
            ),
        ),
        page="offset",
    ),
    S(
        "puppeteer",
        "the browser",
        "prefixed",
        "",
        (),
        (),
        (
            B(
                ("navigate",),
                "Open a URL in the controlled browser tab and wait for it to load.",
                (s("url", "Address to open"), i("timeout", "Milliseconds to wait", default=30000)),
                ("url",),
            ),
            B(
                ("screenshot",),
                "Take a screenshot of the page or of one element.",
                (
                    s("name", "Name for the screenshot"),
                    s("selector", "CSS selector of an element"),
                    i("width", "Viewport width", default=800),
                    i("height", "Viewport height", default=600),
                ),
                ("name",),
            ),
            B(("click",), "Click an element on the page.", (s("selector", "CSS selector"),), ("selector",)),
            B(
                ("fill",),
                "Type into an input field.",
                (s("selector", "CSS selector"), s("value", "Text")),
                ("selector", "value"),
            ),
            B(
                ("select",),
                "Choose an option of a <select> element.",
                (s("selector", "CSS selector"), s("value", "Value")),
                ("selector", "value"),
            ),
            B(("hover",), "Move the mouse over an element.", (s("selector", "CSS selector"),), ("selector",)),
            B(
                ("evaluate",),
                "Run JavaScript in the page and return its result.",
                (s("script", "JavaScript"),),
                ("script",),
            ),
            B(("get", "page", "html"), "Return the current page's HTML after scripts have run.", ()),
            B(
                ("wait", "for", "selector"),
                "Wait until an element appears on the page.",
                (s("selector", "CSS selector"), i("timeout", "Milliseconds", default=5000)),
                ("selector",),
            ),
            B(("go", "back"), "Go back one page in the tab's history.", ()),
            B(
                ("save", "pdf"),
                "Print the current page to a PDF file.",
                (s("path", "Output file"), s("format", "Paper", enum=("A4", "Letter"), default="A4")),
                ("path",),
            ),
        ),
        prefix="puppeteer",
    ),
    S(
        "shell",
        "the shell",
        "snake",
        "",
        (),
        (),
        (
            B(
                ("run", "command"),
                "Run a shell command and return its exit code, stdout and stderr.",
                (
                    s("command", "Command line, run by /bin/sh -c"),
                    s("cwd", "Working directory"),
                    i("timeout_seconds", "Kill it after this long", default=60),
                ),
                ("command",),
                output=(i("exit_code", "Exit status"), s("stdout", "Standard output"), s("stderr", "Standard error")),
            ),
            B(
                ("run", "script"),
                "Write a script to a temporary file and run it with the given interpreter.",
                (
                    s("script", "Script text"),
                    s("interpreter", "Interpreter", enum=("bash", "python3", "node"), default="bash"),
                ),
                ("script",),
            ),
            B(
                ("list", "processes"),
                "List running processes with PID, CPU and memory use.",
                (s("filter", "Only processes whose command contains this"),),
            ),
            B(
                ("kill", "process"),
                "Send a signal to a process.",
                (i("pid", "Process ID"), s("signal", "Signal", enum=("TERM", "KILL", "INT", "HUP"), default="TERM")),
                ("pid",),
            ),
            B(("get", "working", "directory"), "Print the shell's current working directory.", ()),
            B(
                ("change", "directory"),
                "Change the shell's working directory for later commands.",
                (s("path", "Directory"),),
                ("path",),
            ),
            B(("which",), "Find where an executable is on PATH.", (s("program", "Program name"),), ("program",)),
            B(
                ("get", "command", "history"),
                "Show the commands run in this session, newest last.",
                (i("limit", "How many", default=50),),
            ),
            B(("get", "system", "info"), "Operating system, CPU, memory and disk usage of the host.", ()),
        ),
    ),
    S(
        "dropbox",
        "Dropbox",
        "dotted",
        "in Dropbox",
        (),
        (
            R(
                "shared link",
                "shared links",
                s("url", "Shared link URL"),
                (
                    s("path", "File or folder to share"),
                    s("requested_visibility", "Who can open it", enum=("public", "team_only", "password")),
                ),
                "lcd",
                required=1,
            ),
        ),
        (
            B(
                ("files", "listFolder"),
                "List the contents of a Dropbox folder.",
                (s("path", "Folder path, '' for the root"), b("recursive", "Include subfolders", default=False)),
                ("path",),
            ),
            B(("files", "download"), "Download a file from Dropbox.", (s("path", "File path"),), ("path",)),
            B(
                ("files", "upload"),
                "Upload content to a path in Dropbox.",
                (
                    s("path", "Destination path"),
                    s("content", "File content"),
                    s("mode", "Write mode", enum=("add", "overwrite"), default="add"),
                ),
                ("path", "content"),
            ),
            B(("files", "createFolder"), "Create a folder in Dropbox.", (s("path", "Folder path"),), ("path",)),
            B(
                ("files", "move"),
                "Move or rename a file or folder in Dropbox.",
                (s("from_path", "Current path"), s("to_path", "New path")),
                ("from_path", "to_path"),
            ),
            B(
                ("files", "copy"),
                "Copy a file or folder to another path.",
                (s("from_path", "Source"), s("to_path", "Destination")),
                ("from_path", "to_path"),
            ),
            B(("files", "delete"), "Delete a file or folder.", (s("path", "Path"),), ("path",)),
            B(
                ("files", "search"),
                "Search Dropbox by file name and content.",
                (
                    s("query", "Search text"),
                    s("path", "Limit to this folder"),
                    i("max_results", "Results", default=100),
                ),
                ("query",),
            ),
            B(
                ("files", "getMetadata"),
                "Get metadata for a file or folder: size, modified time, revision.",
                (s("path", "Path"),),
                ("path",),
            ),
            B(("files", "listRevisions"), "List the previous revisions of a file.", (s("path", "File"),), ("path",)),
            B(
                ("files", "restore"),
                "Restore a file to an earlier revision.",
                (s("path", "File"), s("rev", "Revision")),
                ("path", "rev"),
            ),
        ),
    ),
    S(
        "trello",
        "Trello",
        "camel",
        "on a Trello board",
        (),
        (
            R("board", "boards", s("board_id", "Board ID"), (s("name", "Name"), s("desc", "Description")), "lgcu"),
            R(
                "list",
                "lists",
                s("list_id", "List ID"),
                (s("board_id", "Board"), s("name", "List name")),
                "lcu",
                required=2,
                filters=("board_id",),
            ),
            R(
                "card",
                "cards",
                s("card_id", "Card ID"),
                (
                    s("list_id", "List to put it in"),
                    s("name", "Card title"),
                    s("desc", "Description"),
                    s("due", "Due date"),
                    a("id_labels", "Label IDs"),
                ),
                "lgcuds",
                required=2,
                filters=("list_id",),
                detail="checklists, attachments, members and due date",
            ),
            R(
                "checklist",
                "checklists",
                s("checklist_id", "Checklist ID"),
                (s("card_id", "Card"), s("name", "Name")),
                "lcd",
                required=2,
            ),
        ),
        (
            B(
                ("move", "card", "to", "list"),
                "Move a card to another list, e.g. from Doing to Done.",
                (s("card_id", "Card"), s("list_id", "Destination list")),
                ("card_id", "list_id"),
            ),
            B(
                ("add", "comment", "to", "card"),
                "Comment on a card.",
                (s("card_id", "Card"), s("text", "Comment")),
                ("card_id", "text"),
            ),
            B(("archive", "card"), "Archive a card.", (s("card_id", "Card"),), ("card_id",)),
        ),
    ),
    S(
        "asana",
        "Asana",
        "prefixed",
        "in Asana",
        (WORKSPACE,),
        (
            R(
                "task",
                "tasks",
                s("task_gid", "Task GID"),
                (
                    s("name", "Task name"),
                    s("notes", "Description"),
                    s("assignee", "Assignee GID or 'me'"),
                    s("due_on", "Due date YYYY-MM-DD"),
                    s("project_gid", "Project"),
                ),
                "lgcuds",
                filters=("assignee", "project_gid"),
            ),
            R("project", "projects", s("project_gid", "Project GID"), (s("name", "Name"), s("team", "Team")), "lgcud"),
            R(
                "section",
                "sections",
                s("section_gid", "Section GID"),
                (s("project_gid", "Project"), s("name", "Name")),
                "lc",
                required=2,
                filters=("project_gid",),
            ),
            R("tag", "tags", s("tag_gid", "Tag GID"), (s("name", "Name"),), "lgc"),
        ),
        (
            B(
                ("add", "subtask"),
                "Create a subtask under a task.",
                (s("parent_gid", "Parent task"), s("name", "Name")),
                ("parent_gid", "name"),
                context=False,
            ),
            B(
                ("add", "task", "comment"),
                "Post a comment on a task.",
                (s("task_gid", "Task"), s("text", "Comment")),
                ("task_gid", "text"),
                context=False,
            ),
            B(("complete", "task"), "Mark a task complete.", (s("task_gid", "Task"),), ("task_gid",), context=False),
        ),
        prefix="asana",
        page="offset",
    ),
    S(
        "airtable",
        "Airtable",
        "kebab",
        "in an Airtable base",
        (s("base_id", "Base ID, app..."),),
        (
            R(
                "record",
                "records",
                s("record_id", "Record ID"),
                (
                    s("table", "Table name or ID"),
                    o("fields", "Field values"),
                    s("filter_by_formula", "Filter formula"),
                    s("view", "View to read through"),
                ),
                "lgcuds",
                required=2,
                filters=("table", "filter_by_formula", "view"),
            ),
            R(
                "table",
                "tables",
                s("table_id", "Table ID"),
                (s("name", "Name"), a("fields", "Field definitions", items="object")),
                "lcu",
                required=2,
            ),
            R("base", "bases", s("base_id", "Base ID"), (), "lg", context=(), detail="its tables, fields and views"),
        ),
        (),
        page="offset",
    ),
    S(
        "obsidian",
        "Obsidian",
        "snake",
        "in the Obsidian vault",
        (),
        (
            R(
                "note",
                "notes",
                s("path", "Path of the note in the vault, e.g. Projects/Plan.md"),
                (
                    s("path", "Path of the note"),
                    s("content", "Markdown content"),
                    s("folder", "Only notes in this folder"),
                    a("tags", "Tags"),
                ),
                "lgcuds",
                filters=("folder", "tags"),
                detail="front matter, tags and links",
            ),
        ),
        (
            B(
                ("append", "to", "note"),
                "Append Markdown to the end of a note.",
                (s("path", "Note"), s("content", "Text")),
                ("path", "content"),
            ),
            B(
                ("get", "daily", "note"),
                "Open today's daily note, creating it from the template if needed.",
                (s("date", "YYYY-MM-DD; today if omitted"),),
            ),
            B(("list", "backlinks"), "List the notes that link to a note.", (s("path", "Note"),), ("path",)),
            B(("list", "vault", "folders"), "List the folders of the vault.", ()),
            B(("search", "by", "tag"), "Find notes carrying a tag.", (s("tag", "Tag, without #"),), ("tag",)),
        ),
    ),
    S(
        "todoist",
        "Todoist",
        "camel",
        "in Todoist",
        (),
        (
            R(
                "task",
                "tasks",
                s("task_id", "Task ID"),
                (
                    s("content", "Task text"),
                    s("due_string", "Due date in natural language, e.g. 'every monday 9am'"),
                    i("priority", "1 (normal) to 4 (urgent)", default=1),
                    s("project_id", "Project"),
                    s("filter", "Todoist filter, e.g. 'today | overdue'"),
                ),
                "lgcud",
                filters=("project_id", "filter"),
            ),
            R("project", "projects", s("project_id", "Project ID"), (s("name", "Name"), s("color", "Colour")), "lgcud"),
            R("label", "labels", s("label_id", "Label ID"), (s("name", "Name"),), "lcd"),
        ),
        (
            B(("close", "task"), "Complete a task.", (s("task_id", "Task"),), ("task_id",)),
            B(("reopen", "task"), "Reopen a completed task.", (s("task_id", "Task"),), ("task_id",)),
        ),
    ),
    S(
        "elasticsearch",
        "Elasticsearch",
        "snake",
        "in the Elasticsearch cluster",
        (),
        (
            R(
                "index",
                "indices",
                s("index", "Index name"),
                (s("index", "Index name"), o("mappings", "Field mappings"), o("settings", "Index settings")),
                "lgcd",
                detail="mappings, settings, document count and size",
            ),
            R(
                "document",
                "documents",
                s("id", "Document ID"),
                (s("index", "Index"), o("document", "The JSON document")),
                "gcud",
                required=2,
            ),
        ),
        (
            B(
                ("search",),
                "Search an index with the query DSL and return hits and aggregations.",
                (
                    s("index", "Index or pattern"),
                    o("query", "Query DSL"),
                    i("size", "Hits", default=10),
                    o("aggs", "Aggregations"),
                ),
                ("index",),
            ),
            B(("esql", "query"), "Run an ES|QL query.", (s("query", "ES|QL, e.g. FROM logs | LIMIT 10"),), ("query",)),
            B(("get", "cluster", "health"), "Cluster status (green, yellow, red), node and shard counts.", ()),
            B(
                ("bulk",),
                "Index, update or delete many documents in one request.",
                (s("body", "NDJSON bulk body"),),
                ("body",),
            ),
            B(
                ("reindex",),
                "Copy documents from one index to another.",
                (s("source", "Source index"), s("dest", "Destination index")),
                ("source", "dest"),
            ),
        ),
    ),
    S(
        "vercel",
        "Vercel",
        "kebab",
        "on Vercel",
        (s("team_id", "Team; personal account if omitted"),),
        (
            R(
                "project",
                "projects",
                s("project_id", "Project ID or name"),
                (s("name", "Name"), s("framework", "Framework preset"), s("git_repository", "Repository to connect")),
                "lgcd",
            ),
            R(
                "deployment",
                "deployments",
                s("deployment_id", "Deployment ID or URL"),
                (
                    s("project", "Project"),
                    s("target", "Environment", enum=("production", "preview")),
                    s("ref", "Git branch or commit"),
                ),
                "lgcd",
                filters=("project", "target"),
                detail="state, URL, build logs and commit",
            ),
            R(
                "environment variable",
                "environment variables",
                s("env_id", "Variable ID"),
                (
                    s("project_id", "Project"),
                    s("key", "Name"),
                    s("value", "Value"),
                    a("target", "Environments it applies to"),
                ),
                "lcud",
                required=3,
            ),
            R("domain", "domains", s("domain", "Domain name"), (s("name", "Domain"),), "lgcd"),
        ),
        (
            B(
                ("get", "deployment", "build", "logs"),
                "Get the build output of a deployment.",
                (s("deployment_id", "Deployment"),),
                ("deployment_id",),
            ),
            B(
                ("promote", "deployment"),
                "Promote a preview deployment to production.",
                (s("deployment_id", "Deployment"),),
                ("deployment_id",),
            ),
        ),
    ),
    S(
        "cloudflare",
        "Cloudflare",
        "snake",
        "in a Cloudflare zone",
        (s("zone_id", "Zone ID"),),
        (
            R(
                "dns record",
                "dns records",
                s("record_id", "DNS record ID"),
                (
                    s("type", "Record type", enum=("A", "AAAA", "CNAME", "TXT", "MX")),
                    s("name", "Host name"),
                    s("content", "Value, e.g. an IP address"),
                    i("ttl", "TTL seconds; 1 is automatic", default=1),
                    b("proxied", "Proxy through Cloudflare", default=False),
                ),
                "lgcud",
                required=3,
                filters=("type", "name"),
            ),
            R(
                "worker",
                "workers",
                s("script_name", "Worker name"),
                (s("script_name", "Name"), s("script", "JavaScript module source")),
                "lgcd",
                required=2,
                context=(ACCOUNT,),
            ),
            R(
                "kv namespace",
                "kv namespaces",
                s("namespace_id", "Namespace ID"),
                (s("title", "Title"),),
                "lcd",
                context=(ACCOUNT,),
            ),
            R("r2 bucket", "r2 buckets", s("bucket_name", "Bucket"), (s("name", "Name"),), "lcd", context=(ACCOUNT,)),
        ),
        (
            B(
                ("purge", "cache"),
                "Purge cached files from the CDN, everything or by URL.",
                (a("files", "URLs to purge"), b("purge_everything", "Purge the whole zone", default=False)),
            ),
            B(
                ("kv", "put"),
                "Write a value under a key in a KV namespace.",
                (s("namespace_id", "Namespace"), s("key", "Key"), s("value", "Value")),
                ("namespace_id", "key", "value"),
                context=False,
            ),
            B(
                ("kv", "get"),
                "Read the value stored under a key in a KV namespace.",
                (s("namespace_id", "Namespace"), s("key", "Key")),
                ("namespace_id", "key"),
                context=False,
            ),
            B(
                ("get", "zone", "analytics"),
                "Requests, bandwidth and threats for a zone over a time range.",
                (s("since", "Start, ISO 8601"), s("until", "End")),
                ("since",),
            ),
        ),
        page="page",
    ),
    S(
        "google-sheets",
        "Google Sheets",
        "camel",
        "in a Google Sheets spreadsheet",
        (s("spreadsheet_id", "Spreadsheet ID from its URL"),),
        (
            R("sheet", "sheets", i("sheet_id", "Sheet (tab) ID"), (s("title", "Tab title"),), "lcd"),
            R(
                "spreadsheet",
                "spreadsheets",
                s("spreadsheet_id", "Spreadsheet"),
                (s("title", "Title"),),
                "gc",
                context=(),
            ),
        ),
        (
            B(
                ("read", "range"),
                "Read the values of a cell range, e.g. Sheet1!A1:D20.",
                (
                    s("range", "A1 notation"),
                    s(
                        "value_render",
                        "How values are rendered",
                        enum=("FORMATTED_VALUE", "UNFORMATTED_VALUE", "FORMULA"),
                    ),
                ),
                ("range",),
            ),
            B(
                ("write", "range"),
                "Write values into a range, overwriting what is there.",
                (s("range", "A1 notation"), a("values", "Rows of values", items="array")),
                ("range", "values"),
            ),
            B(
                ("append", "rows"),
                "Append rows after the last row of a table.",
                (s("range", "Table range"), a("values", "Rows", items="array")),
                ("range", "values"),
            ),
            B(("clear", "range"), "Clear the values of a range.", (s("range", "A1 notation"),), ("range",)),
            B(
                ("find", "replace"),
                "Find and replace text across the spreadsheet.",
                (s("find", "Text to find"), s("replacement", "Replacement"), b("match_case", "Case sensitive")),
                ("find", "replacement"),
            ),
        ),
    ),
    S(
        "zoom",
        "Zoom",
        "snake",
        "in Zoom",
        (),
        (
            R(
                "meeting",
                "meetings",
                i("meeting_id", "Meeting ID"),
                (
                    s("topic", "Topic"),
                    s("start_time", "Start, ISO 8601"),
                    i("duration", "Minutes"),
                    s("timezone", "IANA time zone for start_time"),
                    s("agenda", "Agenda"),
                ),
                "lgcud",
                required=2,
                detail="join URL, passcode and settings",
            ),
            R(
                "recording",
                "recordings",
                s("meeting_uuid", "Meeting UUID"),
                (s("from", "Start date"), s("to", "End date")),
                "lgd",
                filters=("from", "to"),
            ),
        ),
        (
            B(
                ("get", "meeting", "transcript"),
                "Get the transcript of a recorded meeting.",
                (s("meeting_uuid", "Meeting"),),
                ("meeting_uuid",),
            ),
            B(
                ("list", "meeting", "participants"),
                "Who attended a past meeting and for how long.",
                (s("meeting_uuid", "Meeting"),),
                ("meeting_uuid",),
            ),
        ),
        page="page_token",
    ),
    S(
        "bitbucket",
        "Bitbucket",
        "dotted",
        "in a Bitbucket repository",
        (s("workspace", "Workspace slug"), s("repo_slug", "Repository slug")),
        (
            R(
                "pull request",
                "pull requests",
                i("pull_request_id", "Pull request ID"),
                (
                    s("title", "Title"),
                    s("source_branch", "Source"),
                    s("destination_branch", "Destination"),
                    s("state", "State", enum=("OPEN", "MERGED", "DECLINED")),
                ),
                "lgcu",
                required=2,
                filters=("state",),
            ),
            R(
                "branch",
                "branches",
                s("name", "Branch"),
                (s("name", "Name"), s("target", "Commit hash to branch from")),
                "lgcd",
                required=2,
            ),
            R(
                "commit",
                "commits",
                s("commit", "Commit hash"),
                (s("include", "Branch to list from"),),
                "lg",
                filters=("include",),
            ),
            R("pipeline", "pipelines", s("pipeline_uuid", "Pipeline UUID"), (s("branch", "Branch to run"),), "lgc"),
        ),
        (
            B(
                ("pullrequests", "diff"),
                "Get the diff of a pull request.",
                (i("pull_request_id", "Pull request"),),
                ("pull_request_id",),
            ),
            B(
                ("pullrequests", "approve"),
                "Approve a pull request.",
                (i("pull_request_id", "Pull request"),),
                ("pull_request_id",),
            ),
            B(
                ("source", "read"),
                "Read a file or list a directory at a commit or branch.",
                (s("commit", "Commit or branch"), s("path", "Path")),
                ("commit", "path"),
            ),
        ),
        page="page",
    ),
    S(
        "calculator",
        "the calculator",
        "snake",
        "",
        (),
        (),
        (
            B(
                ("evaluate", "expression"),
                "Evaluate a math expression such as (2 + 3) * sqrt(16) / 4.",
                (s("expression", "Expression"), i("precision", "Decimal places", default=10)),
                ("expression",),
                output=(num("result", "The value"),),
            ),
            B(
                ("convert", "units"),
                "Convert a quantity between units, e.g. miles to kilometres or °F to °C.",
                (num("value", "Quantity"), s("from_unit", "Unit to convert from"), s("to_unit", "Unit to convert to")),
                ("value", "from_unit", "to_unit"),
            ),
            B(
                ("convert", "currency"),
                "Convert an amount between currencies at today's exchange rate.",
                (num("amount", "Amount"), s("from", "ISO code"), s("to", "ISO code")),
                ("amount", "from", "to"),
            ),
            B(
                ("statistics",),
                "Mean, median, standard deviation, min and max of a list of numbers.",
                (a("numbers", "The numbers", items="number"),),
                ("numbers",),
            ),
            B(
                ("date", "difference"),
                "Days, weeks and months between two dates.",
                (s("start", "YYYY-MM-DD"), s("end", "YYYY-MM-DD")),
                ("start", "end"),
            ),
            B(
                ("add", "duration", "to", "date"),
                "Add or subtract a duration to a date or timestamp.",
                (s("date", "ISO 8601 date or date-time"), s("duration", "e.g. P3D or -2h")),
                ("date", "duration"),
            ),
        ),
    ),
    S(
        "web-search",
        "the web search engine",
        "kebab",
        "",
        (),
        (),
        (
            B(
                ("web", "search"),
                "Search the web and return titles, URLs and snippets.",
                (
                    s("query", "Search terms"),
                    i("count", "Results", default=10),
                    s("freshness", "Recency", enum=("day", "week", "month", "year")),
                ),
                ("query",),
            ),
            B(
                ("news", "search"),
                "Search recent news articles.",
                (s("query", "Search terms"), i("count", "Results")),
                ("query",),
            ),
            B(
                ("image", "search"),
                "Search for images and return their URLs and sizes.",
                (s("query", "Search terms"), s("safe_search", "Filter", enum=("off", "moderate", "strict"))),
                ("query",),
            ),
            B(
                ("local", "search"),
                "Search for businesses and places near a location.",
                (s("query", "What"), s("location", "Where")),
                ("query",),
            ),
            B(
                ("summarize", "results"),
                "Search and return an AI-written summary with citations.",
                (s("query", "Question"),),
                ("query",),
            ),
        ),
    ),
    S(
        "pdf",
        "the PDF toolkit",
        "camel",
        "",
        (),
        (),
        (
            B(
                ("extract", "text"),
                "Extract the text of a PDF file, page by page.",
                (s("path", "PDF file"), s("pages", "Page range such as 1-3,7")),
                ("path",),
            ),
            B(
                ("merge", "pdfs"),
                "Merge several PDF files into one.",
                (a("paths", "Files, in order"), s("output_path", "Result file")),
                ("paths", "output_path"),
            ),
            B(
                ("split", "pdf"),
                "Split a PDF into one file per page or per range.",
                (s("path", "PDF file"), s("ranges", "Ranges such as 1-2,3-5"), s("output_dir", "Directory")),
                ("path",),
            ),
            B(
                ("get", "metadata"),
                "Title, author, page count and creation date of a PDF.",
                (s("path", "File"),),
                ("path",),
            ),
            B(
                ("fill", "form"),
                "Fill the form fields of a PDF and save a copy.",
                (s("path", "PDF form"), o("values", "Field name to value"), s("output_path", "Result")),
                ("path", "values"),
            ),
            B(
                ("render", "page", "image"),
                "Render a page of a PDF to a PNG image.",
                (s("path", "PDF"), i("page", "Page number", default=1), i("dpi", "Resolution", default=150)),
                ("path",),
            ),
        ),
    ),
    S(
        "home-assistant",
        "Home Assistant",
        "prefixed",
        "",
        (),
        (
            R(
                "automation",
                "automations",
                s("entity_id", "automation.* entity"),
                (
                    s("alias", "Name"),
                    a("triggers", "Triggers", items="object"),
                    a("actions", "Actions", items="object"),
                ),
                "lgcd",
                required=3,
            ),
        ),
        (
            B(
                ("get", "state"),
                "Get the state and attributes of an entity such as light.kitchen or sensor.temp.",
                (s("entity_id", "Entity ID"),),
                ("entity_id",),
            ),
            B(
                ("list", "entities"),
                "List entities, optionally of one domain such as light or switch.",
                (s("domain", "Domain"),),
            ),
            B(
                ("call", "service"),
                "Call a service, e.g. light.turn_on with brightness.",
                (s("domain", "Domain"), s("service", "Service"), o("data", "Service data")),
                ("domain", "service"),
            ),
            B(("turn", "on"), "Turn on a light, switch or fan.", (s("entity_id", "Entity"),), ("entity_id",)),
            B(("turn", "off"), "Turn off a light, switch or fan.", (s("entity_id", "Entity"),), ("entity_id",)),
            B(
                ("get", "history"),
                "State history of an entity over a period.",
                (s("entity_id", "Entity"), s("start_time", "Start"), s("end_time", "End")),
                ("entity_id",),
            ),
        ),
        prefix="hass",
    ),
    S(
        "npm",
        "the npm registry",
        "kebab",
        "",
        (),
        (),
        (
            B(
                ("search", "packages"),
                "Search the npm registry for packages.",
                (s("text", "Search text"), i("size", "Results", default=20)),
                ("text",),
            ),
            B(
                ("get", "package", "info"),
                "Package metadata: latest version, description, license, repository.",
                (s("name", "Package name"),),
                ("name",),
            ),
            B(
                ("list", "versions"),
                "List the published versions of a package with their dates.",
                (s("name", "Package name"),),
                ("name",),
            ),
            B(
                ("get", "download", "counts"),
                "Downloads of a package over the last day, week or month.",
                (s("name", "Package"), s("period", "Period", enum=("last-day", "last-week", "last-month"))),
                ("name",),
            ),
            B(
                ("get", "dependencies"),
                "Dependencies of a package version.",
                (s("name", "Package"), s("version", "Version", default="latest")),
                ("name",),
            ),
        ),
    ),
    S(
        "arxiv",
        "arXiv",
        "snake",
        "",
        (),
        (),
        (
            B(
                ("search", "papers"),
                "Search arXiv papers by keywords, author or category.",
                (
                    s("query", "Search terms"),
                    i("max_results", "Results", default=10),
                    s("category", "e.g. cs.LG"),
                    s("sort_by", "Order", enum=("relevance", "lastUpdatedDate", "submittedDate")),
                ),
                ("query",),
            ),
            B(
                ("get", "paper"),
                "Get a paper's abstract, authors and links by its arXiv ID.",
                (s("paper_id", "arXiv ID such as 2401.01234"),),
                ("paper_id",),
            ),
            B(
                ("download", "paper"),
                "Download a paper's PDF and convert it to text.",
                (s("paper_id", "arXiv ID"),),
                ("paper_id",),
            ),
        ),
    ),
    S(
        "wikipedia",
        "Wikipedia",
        "camel",
        "",
        (),
        (),
        (
            B(
                ("search", "articles"),
                "Search Wikipedia for articles.",
                (s("query", "Search terms"), i("limit", "Results", default=10)),
                ("query",),
            ),
            B(
                ("get", "article"),
                "Get the full text of a Wikipedia article.",
                (s("title", "Article title"), s("language", "Wiki language", default="en")),
                ("title",),
            ),
            B(("get", "summary"), "Get the lead summary of an article.", (s("title", "Article title"),), ("title",)),
            B(
                ("get", "related", "topics"),
                "Articles linked from an article.",
                (s("title", "Article title"),),
                ("title",),
            ),
            B(
                ("on", "this", "day"),
                "Events, births and deaths on a calendar day.",
                (i("month", "1-12"), i("day", "1-31")),
                ("month", "day"),
            ),
        ),
    ),
    S(
        "image-gen",
        "the image generator",
        "snake",
        "",
        (),
        (),
        (
            B(
                ("generate", "image"),
                "Generate an image from a text prompt.",
                (
                    s("prompt", "What to draw"),
                    s("size", "Size", enum=("256x256", "512x512", "1024x1024"), default="1024x1024"),
                    s("style", "Style", enum=("vivid", "natural")),
                    i("n", "Images", default=1),
                ),
                ("prompt",),
            ),
            B(
                ("edit", "image"),
                "Edit an image with a prompt and an optional mask.",
                (s("image_path", "Image"), s("prompt", "Change to make"), s("mask_path", "Mask")),
                ("image_path", "prompt"),
            ),
            B(
                ("upscale", "image"),
                "Upscale an image by 2x or 4x.",
                (s("image_path", "Image"), i("factor", "2 or 4")),
                ("image_path",),
            ),
            B(
                ("remove", "background"),
                "Cut out the subject of a photo.",
                (s("image_path", "Image"),),
                ("image_path",),
            ),
            B(("describe", "image"), "Describe what an image shows.", (s("image_path", "Image"),), ("image_path",)),
        ),
    ),
    S(
        "onedrive",
        "OneDrive",
        "snake",
        "in OneDrive",
        (),
        (
            R(
                "item",
                "items",
                s("item_id", "Drive item ID"),
                (s("name", "Name"), s("parent_id", "Parent folder"), s("content", "Content for files")),
                "gcuds",
                detail="size, hashes, created and modified times",
            ),
        ),
        (
            B(
                ("list", "children"),
                "List the files and folders in a OneDrive folder.",
                (s("folder_path", "Folder path, '/' for the root", default="/"),),
            ),
            B(("download", "item"), "Download the content of a file.", (s("item_id", "File"),), ("item_id",)),
            B(
                ("upload", "file"),
                "Upload a local file into a folder.",
                (s("local_path", "File"), s("folder_path", "Destination folder")),
                ("local_path",),
            ),
            B(
                ("create", "sharing", "link"),
                "Create a view or edit link for an item.",
                (s("item_id", "Item"), s("type", "Type", enum=("view", "edit"))),
                ("item_id",),
            ),
        ),
    ),
    S(
        "mailchimp",
        "Mailchimp",
        "kebab",
        "in Mailchimp",
        (),
        (
            R("audience", "audiences", s("list_id", "Audience ID"), (s("name", "Name"),), "lg"),
            R(
                "campaign",
                "campaigns",
                s("campaign_id", "Campaign ID"),
                (
                    s("list_id", "Audience"),
                    s("subject_line", "Subject"),
                    s("from_name", "Sender name"),
                    s("status", "Status", enum=("save", "schedule", "sent")),
                ),
                "lgcud",
                required=2,
                filters=("status",),
            ),
            R(
                "member",
                "members",
                s("subscriber_hash", "MD5 of the lowercase email"),
                (
                    s("list_id", "Audience"),
                    s("email_address", "Email"),
                    s("status", "Status", enum=("subscribed", "unsubscribed", "pending")),
                ),
                "lgcuds",
                required=2,
            ),
        ),
        (
            B(("send", "campaign"), "Send a campaign now.", (s("campaign_id", "Campaign"),), ("campaign_id",)),
            B(
                ("schedule", "campaign"),
                "Schedule a campaign for a date and time.",
                (s("campaign_id", "Campaign"), s("schedule_time", "UTC date-time")),
                ("campaign_id", "schedule_time"),
            ),
            B(
                ("get", "campaign", "report"),
                "Opens, clicks and bounces of a sent campaign.",
                (s("campaign_id", "Campaign"),),
                ("campaign_id",),
            ),
        ),
        page="offset",
    ),
    S(
        "supabase",
        "Supabase",
        "snake",
        "in a Supabase project",
        (s("project_ref", "Project reference"),),
        (
            R(
                "edge function",
                "edge functions",
                s("slug", "Function slug"),
                (s("slug", "Slug"), s("body", "TypeScript source")),
                "lgcd",
                required=2,
            ),
            R(
                "migration",
                "migrations",
                s("version", "Migration version"),
                (s("name", "Name"), s("query", "SQL")),
                "lc",
                required=2,
            ),
            R(
                "storage bucket",
                "storage buckets",
                s("bucket_id", "Bucket"),
                (s("name", "Name"), b("public", "Public")),
                "lcd",
            ),
        ),
        (
            B(("execute", "sql"), "Run SQL against the project's Postgres database.", (s("query", "SQL"),), ("query",)),
            B(
                ("get", "logs"),
                "Recent logs of a service of the project.",
                (s("service", "Service", enum=("api", "postgres", "auth", "storage", "edge-function")),),
                ("service",),
            ),
            B(("generate", "typescript", "types"), "Generate TypeScript types from the database schema.", ()),
            B(("get", "project", "url"), "The project's API URL and anon key.", ()),
        ),
    ),
    S(
        "grafana",
        "Grafana",
        "camel",
        "in Grafana",
        (),
        (
            R(
                "dashboard",
                "dashboards",
                s("uid", "Dashboard UID"),
                (s("title", "Title"), o("dashboard", "Dashboard JSON model"), s("folder_uid", "Folder")),
                "gcuds",
                required=2,
            ),
            R(
                "alert rule",
                "alert rules",
                s("uid", "Rule UID"),
                (s("title", "Title"), s("condition", "Condition")),
                "lgcud",
                required=2,
            ),
            R("folder", "folders", s("uid", "Folder UID"), (s("title", "Title"),), "lcd"),
            R("datasource", "datasources", s("uid", "Data source UID"), (), "lg"),
        ),
        (
            B(
                ("query", "prometheus"),
                "Run a PromQL query on a Prometheus data source over a time range.",
                (
                    s("datasource_uid", "Data source"),
                    s("expr", "PromQL"),
                    s("start", "Start, e.g. now-1h"),
                    s("end", "End"),
                    s("step", "Resolution"),
                ),
                ("datasource_uid", "expr"),
            ),
            B(
                ("query", "loki", "logs"),
                "Run a LogQL query and return log lines.",
                (s("datasource_uid", "Data source"), s("logql", "LogQL"), i("limit", "Lines", default=100)),
                ("datasource_uid", "logql"),
            ),
            B(
                ("create", "annotation"),
                "Add an annotation to dashboards at a time.",
                (s("text", "Text"), i("time", "Epoch milliseconds"), a("tags", "Tags")),
                ("text",),
            ),
        ),
    ),
    S(
        "bigquery",
        "BigQuery",
        "snake",
        "in BigQuery",
        (s("project_id", "Google Cloud project"),),
        (
            R(
                "dataset",
                "datasets",
                s("dataset_id", "Dataset ID"),
                (
                    s("dataset_id", "Dataset ID"),
                    s("location", "Location such as US or EU", default="US"),
                    s("description", "Description"),
                ),
                "lgcd",
                detail="location, labels and default table expiration",
            ),
            R(
                "table",
                "tables",
                s("table_id", "dataset.table"),
                (
                    s("table_id", "dataset.table"),
                    a("schema", "Column definitions", items="object"),
                    s("dataset_id", "Only tables of this dataset"),
                ),
                "lgcd",
                filters=("dataset_id",),
                detail="schema, row count, size and partitioning",
            ),
            R(
                "job",
                "jobs",
                s("job_id", "Job ID"),
                (s("state_filter", "State", enum=("done", "pending", "running")),),
                "lg",
                filters=("state_filter",),
                detail="statistics, bytes processed and errors",
            ),
            R(
                "routine",
                "routines",
                s("routine_id", "Routine ID"),
                (s("dataset_id", "Dataset"),),
                "lgd",
                filters=("dataset_id",),
            ),
        ),
        (
            B(
                ("run", "query"),
                "Run a GoogleSQL query and return the rows.",
                (
                    s("sql", "Query text"),
                    i("max_results", "Rows to return", default=1000),
                    b("use_legacy_sql", "Use legacy SQL", default=False),
                ),
                ("sql",),
            ),
            B(
                ("dry", "run", "query"),
                "Validate a query and estimate how many bytes it would scan, without running it.",
                (s("sql", "Query text"),),
                ("sql",),
            ),
            B(
                ("export", "table"),
                "Export a table to files in Cloud Storage as CSV, JSON, Avro or Parquet.",
                (
                    s("table_id", "dataset.table"),
                    s("destination_uri", "gs://bucket/path-*.csv"),
                    s("format", "Format", enum=("CSV", "NEWLINE_DELIMITED_JSON", "AVRO", "PARQUET")),
                ),
                ("table_id", "destination_uri"),
            ),
            B(
                ("load", "table", "from", "gcs"),
                "Load data files from Cloud Storage into a table.",
                (s("table_id", "dataset.table"), s("source_uri", "gs:// URI"), b("autodetect", "Infer the schema")),
                ("table_id", "source_uri"),
            ),
        ),
        page="page_token",
    ),
    S(
        "snowflake",
        "Snowflake",
        "prefixed",
        "in the Snowflake account",
        (),
        (
            R(
                "warehouse",
                "warehouses",
                s("name", "Warehouse name"),
                (
                    s("name", "Name"),
                    s("size", "Size", enum=("XSMALL", "SMALL", "MEDIUM", "LARGE")),
                    i("auto_suspend", "Seconds idle before suspending", default=600),
                ),
                "lgcud",
            ),
            R("database", "databases", s("name", "Database"), (s("name", "Name"), s("comment", "Comment")), "lgcd"),
            R(
                "schema",
                "schemas",
                s("name", "Schema"),
                (s("database", "Database"), s("name", "Name")),
                "lcd",
                filters=("database",),
            ),
            R(
                "stage",
                "stages",
                s("name", "Stage"),
                (s("name", "Name"), s("url", "External location, e.g. s3://...")),
                "lcd",
            ),
        ),
        (
            B(
                ("run", "query"),
                "Run SQL on a warehouse and return the result set.",
                (s("sql", "SQL"), s("warehouse", "Warehouse"), s("role", "Role to use")),
                ("sql",),
            ),
            B(
                ("describe", "table"),
                "Columns, types and comments of a table.",
                (s("table", "database.schema.table"),),
                ("table",),
            ),
            B(
                ("query", "history"),
                "Recent queries with their duration, bytes scanned and status.",
                (i("limit", "Queries", default=100), s("user", "Only this user")),
            ),
        ),
        prefix="snowflake",
    ),
    S(
        "azure-devops",
        "Azure DevOps",
        "kebab",
        "in an Azure DevOps project",
        (s("project", "Project name or ID"),),
        (
            R(
                "work item",
                "work items",
                i("id", "Work item ID"),
                (
                    s("title", "Title"),
                    s("type", "Type", enum=("Bug", "Task", "User Story", "Feature", "Epic")),
                    s("description", "HTML description"),
                    s("assigned_to", "Assignee"),
                    s("state", "State"),
                    s("area_path", "Area path"),
                ),
                "lgcuds",
                required=2,
                filters=("state", "assigned_to"),
            ),
            R("pipeline", "pipelines", i("pipeline_id", "Pipeline ID"), (s("branch", "Branch to run"),), "lgc"),
            R("repository", "repositories", s("repository_id", "Repository"), (s("name", "Name"),), "lgcd"),
            R(
                "pull request",
                "pull requests",
                i("pull_request_id", "PR ID"),
                (
                    s("repository_id", "Repository"),
                    s("source_ref_name", "Source branch"),
                    s("target_ref_name", "Target branch"),
                    s("title", "Title"),
                    s("status", "Status", enum=("active", "completed", "abandoned")),
                ),
                "lgcu",
                required=4,
                filters=("repository_id", "status"),
            ),
            R(
                "build",
                "builds",
                i("build_id", "Build ID"),
                (s("result_filter", "Result", enum=("succeeded", "failed")),),
                "lg",
                filters=("result_filter",),
                detail="timeline, logs and artifacts",
            ),
            R(
                "wiki page",
                "wiki pages",
                s("path", "Page path"),
                (s("wiki", "Wiki name"), s("path", "Page path"), s("content", "Markdown")),
                "gcud",
                required=3,
            ),
        ),
        (
            B(
                ("get", "build", "log"),
                "Get the log of one step of a build.",
                (i("build_id", "Build"), i("log_id", "Log")),
                ("build_id", "log_id"),
            ),
            B(
                ("add", "work", "item", "comment"),
                "Comment on a work item.",
                (i("id", "Work item"), s("text", "Comment")),
                ("id", "text"),
            ),
        ),
        page="offset",
    ),
    S(
        "circleci",
        "CircleCI",
        "snake",
        "in CircleCI",
        (s("project_slug", "e.g. gh/org/repo"),),
        (
            R(
                "pipeline",
                "pipelines",
                s("pipeline_id", "Pipeline ID"),
                (s("branch", "Only this branch"),),
                "lg",
                filters=("branch",),
            ),
            R(
                "workflow",
                "workflows",
                s("workflow_id", "Workflow ID"),
                (s("pipeline_id", "Pipeline"),),
                "lg",
                filters=("pipeline_id",),
                context=(),
            ),
            R(
                "job",
                "jobs",
                i("job_number", "Job number"),
                (s("workflow_id", "Workflow"),),
                "lg",
                filters=("workflow_id",),
            ),
            R(
                "context",
                "contexts",
                s("context_id", "Context ID"),
                (s("name", "Name"), s("owner_slug", "Organization")),
                "lcd",
                context=(),
            ),
            R(
                "environment variable",
                "environment variables",
                s("name", "Variable name"),
                (s("name", "Name"), s("value", "Value")),
                "lcd",
                required=2,
            ),
        ),
        (
            B(
                ("trigger", "pipeline"),
                "Start a new pipeline run on a branch or tag.",
                (s("branch", "Branch"), s("tag", "Tag"), o("parameters", "Pipeline parameters")),
            ),
            B(
                ("rerun", "workflow"),
                "Rerun a workflow, optionally only its failed jobs.",
                (s("workflow_id", "Workflow"), b("from_failed", "Only the failed jobs", default=True)),
                ("workflow_id",),
                context=False,
            ),
            B(
                ("get", "job", "artifacts"),
                "List the artifacts a job stored, with download URLs.",
                (i("job_number", "Job"),),
                ("job_number",),
            ),
            B(
                ("get", "test", "results"),
                "Test results of a job: passed, failed and flaky tests.",
                (i("job_number", "Job"),),
                ("job_number",),
            ),
            B(
                ("get", "build", "failure", "logs"),
                "Logs of the failing steps of the latest build of a branch.",
                (s("branch", "Branch"),),
                ("branch",),
            ),
        ),
        page="page_token",
    ),
    S(
        "okta",
        "Okta",
        "camel",
        "in the Okta organization",
        (),
        (
            R(
                "user",
                "users",
                s("user_id", "User ID or login"),
                (
                    s("email", "Email"),
                    s("first_name", "First name"),
                    s("last_name", "Last name"),
                    s("login", "Login"),
                    b("activate", "Activate now", default=True),
                ),
                "lgcuds",
                required=3,
                detail="profile, status and factors",
            ),
            R(
                "group",
                "groups",
                s("group_id", "Group ID"),
                (s("name", "Name"), s("description", "Description")),
                "lgcud",
            ),
            R(
                "application",
                "applications",
                s("app_id", "App ID"),
                (s("label", "Label"), s("sign_on_mode", "Mode")),
                "lgcud",
            ),
        ),
        (
            B(
                ("deactivate", "user"),
                "Deactivate a user so they can no longer sign in.",
                (s("user_id", "User"),),
                ("user_id",),
            ),
            B(
                ("reset", "password"),
                "Send a password reset email, or return a one-time reset link.",
                (s("user_id", "User"), b("send_email", "Email the link", default=True)),
                ("user_id",),
            ),
            B(
                ("add", "user", "to", "group"),
                "Add a user to a group.",
                (s("group_id", "Group"), s("user_id", "User")),
                ("group_id", "user_id"),
            ),
            B(
                ("get", "system", "logs"),
                "Search the audit log of sign-ins and admin changes.",
                (s("since", "Start time"), s("filter", "Filter expression")),
                (),
            ),
        ),
    ),
    S(
        "intercom",
        "Intercom",
        "kebab",
        "in Intercom",
        (),
        (
            R(
                "conversation",
                "conversations",
                s("conversation_id", "Conversation ID"),
                (s("state", "State", enum=("open", "closed", "snoozed")),),
                "lgs",
                filters=("state",),
                detail="its parts, tags and assignee",
            ),
            R(
                "contact",
                "contacts",
                s("contact_id", "Contact ID"),
                (
                    s("email", "Email"),
                    s("name", "Name"),
                    s("role", "Role", enum=("user", "lead")),
                    o("custom_attributes", "Attributes"),
                ),
                "lgcuds",
            ),
            R(
                "article",
                "articles",
                s("article_id", "Article ID"),
                (
                    s("title", "Title"),
                    s("body", "HTML"),
                    s("author_id", "Author"),
                    s("state", "State", enum=("published", "draft")),
                ),
                "lgcud",
                required=3,
            ),
            R("company", "companies", s("company_id", "Company ID"), (s("name", "Name"), s("plan", "Plan")), "lgcu"),
        ),
        (
            B(
                ("reply", "to", "conversation"),
                "Reply to a conversation as an admin, or add a private note.",
                (
                    s("conversation_id", "Conversation"),
                    s("body", "Message"),
                    s("message_type", "Type", enum=("comment", "note"), default="comment"),
                ),
                ("conversation_id", "body"),
            ),
            B(
                ("close", "conversation"),
                "Close a conversation.",
                (s("conversation_id", "Conversation"),),
                ("conversation_id",),
            ),
            B(
                ("assign", "conversation"),
                "Assign a conversation to a teammate or team.",
                (s("conversation_id", "Conversation"), s("assignee_id", "Admin or team")),
                ("conversation_id", "assignee_id"),
            ),
        ),
    ),
    S(
        "quickbooks",
        "QuickBooks",
        "camel",
        "in QuickBooks Online",
        (),
        (
            R(
                "invoice",
                "invoices",
                s("invoice_id", "Invoice ID"),
                (
                    s("customer_id", "Customer"),
                    a("lines", "Line items", items="object"),
                    s("due_date", "Due date"),
                    s("email", "Send to this address"),
                ),
                "lgcud",
                required=2,
                detail="lines, balance and payment status",
            ),
            R(
                "customer",
                "customers",
                s("customer_id", "Customer ID"),
                (s("display_name", "Name"), s("email", "Email"), s("phone", "Phone")),
                "lgcus",
            ),
            R(
                "bill",
                "bills",
                s("bill_id", "Bill ID"),
                (s("vendor_id", "Vendor"), a("lines", "Lines", items="object")),
                "lgc",
                required=2,
            ),
            R(
                "payment",
                "payments",
                s("payment_id", "Payment ID"),
                (s("customer_id", "Customer"), num("amount", "Amount"), s("invoice_id", "Invoice it pays")),
                "lgc",
                required=2,
            ),
            R(
                "item",
                "items",
                s("item_id", "Item ID"),
                (s("name", "Name"), num("unit_price", "Price"), s("type", "Type", enum=("Inventory", "Service"))),
                "lgc",
            ),
            R(
                "account",
                "accounts",
                s("account_id", "Account ID"),
                (s("account_type", "Type"),),
                "lg",
                filters=("account_type",),
            ),
        ),
        (
            B(
                ("get", "profit", "and", "loss"),
                "Profit and loss report for a date range.",
                (s("start_date", "Start"), s("end_date", "End")),
                ("start_date", "end_date"),
            ),
            B(("get", "balance", "sheet"), "Balance sheet as of a date.", (s("as_of", "Date"),)),
        ),
    ),
    S(
        "box",
        "Box",
        "snake",
        "in Box",
        (),
        (
            R(
                "file",
                "files",
                s("file_id", "File ID"),
                (s("name", "New name"), s("description", "Description")),
                "gud",
                detail="size, owner, version and shared link",
            ),
            R(
                "folder",
                "folders",
                s("folder_id", "Folder ID; '0' is the root"),
                (s("name", "Folder name"), s("parent_id", "Parent folder")),
                "gcud",
                required=2,
            ),
            R(
                "collaboration",
                "collaborations",
                s("collaboration_id", "Collaboration ID"),
                (
                    s("item_id", "File or folder"),
                    s("login", "Who to invite"),
                    s("role", "Role", enum=("editor", "viewer", "previewer", "uploader")),
                ),
                "lcd",
                required=3,
            ),
            R(
                "comment",
                "comments",
                s("comment_id", "Comment ID"),
                (s("file_id", "File"), s("message", "Text")),
                "lc",
                required=2,
                filters=("file_id",),
            ),
            R(
                "webhook",
                "webhooks",
                s("webhook_id", "Webhook ID"),
                (s("target_id", "Item to watch"), s("address", "URL to notify"), a("triggers", "Events")),
                "lcd",
                required=3,
            ),
        ),
        (
            B(
                ("list", "folder", "items"),
                "List the files and folders in a Box folder.",
                (s("folder_id", "Folder", default="0"), i("limit", "Items", default=100)),
            ),
            B(
                ("upload", "file"),
                "Upload a local file to a Box folder.",
                (s("local_path", "File"), s("folder_id", "Folder", default="0")),
                ("local_path",),
            ),
            B(("download", "file"), "Download a file's content.", (s("file_id", "File"),), ("file_id",)),
            B(
                ("search", "content"),
                "Search Box files and folders by name, description and text content.",
                (s("query", "Search terms"), a("file_extensions", "Only these extensions")),
                ("query",),
            ),
        ),
        page="offset",
    ),
    S(
        "aws-lambda",
        "AWS Lambda",
        "dotted",
        "in AWS Lambda",
        (REGION,),
        (
            R(
                "function",
                "functions",
                s("function_name", "Function name or ARN"),
                (
                    s("function_name", "Name"),
                    s("runtime", "Runtime", enum=("python3.12", "nodejs20.x", "java21")),
                    s("handler", "Handler, e.g. app.handler"),
                    s("role", "Execution role ARN"),
                    i("timeout", "Seconds", default=3),
                ),
                "lgcud",
                required=4,
                detail="configuration, environment and code location",
            ),
            R(
                "alias",
                "aliases",
                s("alias_name", "Alias"),
                (s("function_name", "Function"), s("name", "Alias name"), s("function_version", "Version")),
                "lgcd",
                required=3,
            ),
            R("layer", "layers", s("layer_name", "Layer"), (), "lg"),
            R(
                "event source mapping",
                "event source mappings",
                s("uuid", "Mapping UUID"),
                (s("function_name", "Function"), s("event_source_arn", "SQS, Kinesis or DynamoDB stream ARN")),
                "lcd",
                required=2,
            ),
        ),
        (
            B(
                ("functions", "invoke"),
                "Invoke a function with a JSON payload and return its response.",
                (
                    s("function_name", "Function"),
                    o("payload", "Event"),
                    s("invocation_type", "How", enum=("RequestResponse", "Event", "DryRun")),
                ),
                ("function_name",),
            ),
            B(
                ("functions", "getLogs"),
                "Recent log events of a function from CloudWatch Logs.",
                (s("function_name", "Function"), i("minutes", "How far back", default=15)),
                ("function_name",),
            ),
        ),
    ),
    S(
        "cloudwatch",
        "CloudWatch",
        "dotted",
        "in CloudWatch",
        (REGION,),
        (
            R(
                "alarm",
                "alarms",
                s("alarm_name", "Alarm name"),
                (
                    s("alarm_name", "Name"),
                    s("metric_name", "Metric"),
                    s("namespace", "Metric namespace"),
                    num("threshold", "Threshold"),
                    s("state_value", "State", enum=("OK", "ALARM", "INSUFFICIENT_DATA")),
                ),
                "lgcd",
                required=4,
                filters=("state_value",),
            ),
            R(
                "dashboard",
                "dashboards",
                s("dashboard_name", "Dashboard"),
                (s("dashboard_name", "Name"), o("dashboard_body", "Widgets JSON")),
                "lgcd",
                required=2,
            ),
            R(
                "log group",
                "log groups",
                s("log_group_name", "Log group"),
                (s("log_group_name", "Name"), i("retention_days", "Retention in days")),
                "lcd",
            ),
            R(
                "metric",
                "metrics",
                s("metric_name", "Metric"),
                (s("namespace", "Namespace, e.g. AWS/EC2"),),
                "l",
                filters=("namespace",),
            ),
        ),
        (
            B(
                ("logs", "filterEvents"),
                "Search a log group for events matching a filter pattern.",
                (
                    s("log_group_name", "Log group"),
                    s("filter_pattern", "Pattern, e.g. ERROR"),
                    s("start_time", "Start"),
                    s("end_time", "End"),
                ),
                ("log_group_name",),
            ),
            B(
                ("logs", "startQuery"),
                "Run a Logs Insights query.",
                (s("log_group_name", "Log group"), s("query", "Insights query"), s("start_time", "Start")),
                ("log_group_name", "query"),
            ),
            B(
                ("metrics", "getData"),
                "Get statistics of a metric over a time range.",
                (
                    s("namespace", "Namespace"),
                    s("metric_name", "Metric"),
                    s("statistic", "Statistic", enum=("Average", "Sum", "Maximum")),
                    i("period", "Seconds per point", default=300),
                ),
                ("namespace", "metric_name"),
            ),
            B(
                ("logs", "tail"),
                "Follow the newest events of a log group.",
                (s("log_group_name", "Log group"),),
                ("log_group_name",),
            ),
        ),
        page="page_token",
    ),
    S(
        "calendly",
        "Calendly",
        "camel",
        "in Calendly",
        (),
        (
            R(
                "event type",
                "event types",
                s("uuid", "Event type UUID"),
                (b("active", "Only active ones"),),
                "lg",
                filters=("active",),
            ),
            R(
                "scheduled event",
                "scheduled events",
                s("uuid", "Event UUID"),
                (
                    s("min_start_time", "From"),
                    s("max_start_time", "Until"),
                    s("status", "Status", enum=("active", "canceled")),
                ),
                "lg",
                filters=("min_start_time", "max_start_time", "status"),
            ),
            R(
                "invitee",
                "invitees",
                s("invitee_uuid", "Invitee"),
                (s("event_uuid", "Event"),),
                "lg",
                filters=("event_uuid",),
            ),
            R(
                "webhook subscription",
                "webhook subscriptions",
                s("uuid", "Subscription"),
                (s("url", "Callback URL"), a("events", "Events")),
                "lcd",
                required=2,
            ),
        ),
        (
            B(
                ("cancel", "event"),
                "Cancel a scheduled meeting and notify the invitee.",
                (s("uuid", "Event"), s("reason", "Reason")),
                ("uuid",),
            ),
            B(
                ("create", "scheduling", "link"),
                "Create a single-use booking link for an event type.",
                (s("event_type", "Event type URI"),),
                ("event_type",),
            ),
            B(
                ("get", "availability"),
                "Open slots of an event type between two dates.",
                (s("event_type", "Event type"), s("start_time", "From"), s("end_time", "Until")),
                ("event_type",),
            ),
        ),
    ),
    S(
        "docusign",
        "DocuSign",
        "kebab",
        "in DocuSign",
        (ACCOUNT,),
        (
            R(
                "envelope",
                "envelopes",
                s("envelope_id", "Envelope ID"),
                (
                    s("email_subject", "Subject"),
                    a("documents", "Documents", items="object"),
                    a("recipients", "Signers", items="object"),
                    s("status", "Status", enum=("created", "sent")),
                ),
                "lgc",
                required=3,
                detail="status, recipients and audit events",
            ),
            R(
                "template",
                "templates",
                s("template_id", "Template"),
                (s("name", "Name"), a("documents", "Documents", items="object")),
                "lgc",
            ),
            R(
                "recipient",
                "recipients",
                s("recipient_id", "Recipient"),
                (s("envelope_id", "Envelope"), s("email", "Email")),
                "lu",
                required=1,
                filters=("envelope_id",),
            ),
        ),
        (
            B(
                ("send", "envelope"),
                "Send a draft envelope for signature.",
                (s("envelope_id", "Envelope"),),
                ("envelope_id",),
            ),
            B(
                ("void", "envelope"),
                "Void an envelope that is out for signature.",
                (s("envelope_id", "Envelope"), s("reason", "Why")),
                ("envelope_id", "reason"),
            ),
            B(
                ("download", "document"),
                "Download a signed document as PDF.",
                (s("envelope_id", "Envelope"), s("document_id", "Document", default="combined")),
                ("envelope_id",),
            ),
            B(
                ("get", "signing", "url"),
                "URL where a signer can sign in the browser.",
                (s("envelope_id", "Envelope"), s("return_url", "Where to go afterwards")),
                ("envelope_id",),
            ),
        ),
    ),
    S(
        "pinecone",
        "Pinecone",
        "snake",
        "in Pinecone",
        (),
        (
            R(
                "index",
                "indexes",
                s("name", "Index name"),
                (
                    s("name", "Name"),
                    i("dimension", "Vector dimension"),
                    s("metric", "Distance", enum=("cosine", "euclidean", "dotproduct")),
                ),
                "lgcd",
                required=2,
            ),
            R("namespace", "namespaces", s("namespace", "Namespace"), (s("index", "Index"),), "ld", context=()),
            R(
                "collection",
                "collections",
                s("name", "Collection"),
                (s("name", "Name"), s("source", "Index to copy")),
                "lgcd",
                required=2,
            ),
        ),
        (
            B(
                ("upsert", "vectors"),
                "Insert or update vectors with metadata.",
                (
                    s("index", "Index"),
                    a("vectors", "id, values, metadata", items="object"),
                    s("namespace", "Namespace"),
                ),
                ("index", "vectors"),
            ),
            B(
                ("query", "vectors"),
                "Find the nearest vectors to a query vector or text.",
                (
                    s("index", "Index"),
                    a("vector", "Query vector", items="number"),
                    s("text", "Text to embed instead"),
                    i("top_k", "Results", default=10),
                    o("filter", "Metadata filter"),
                ),
                ("index",),
            ),
            B(("fetch", "vectors"), "Fetch vectors by ID.", (s("index", "Index"), a("ids", "IDs")), ("index", "ids")),
            B(
                ("delete", "vectors"),
                "Delete vectors by ID or metadata filter.",
                (s("index", "Index"), a("ids", "IDs"), o("filter", "Filter")),
                ("index",),
            ),
            B(
                ("describe", "index", "stats"),
                "Vector counts per namespace and fullness.",
                (s("index", "Index"),),
                ("index",),
            ),
        ),
    ),
)


# -- turning the vocabulary into tools -------------------------------------------------------------------------

VERB_WORDS = {"l": "list", "g": "get", "c": "create", "u": "update", "d": "delete", "s": "search"}
DESCRIPTIONS = {
    "l": (
        "List {plural}{where}.",
        "Returns the {plural}{where}, most recently updated first.",
        "List the {plural} the authenticated user can see{where}.",
        "Get a page of {plural}{where}, optionally filtered.",
    ),
    "g": (
        "Get {a_singular} by its ID.",
        "Retrieve one {singular}{where}, including {detail}.",
        "Fetch the details of a single {singular}.",
        "Returns {a_singular} with {detail}.",
    ),
    "c": (
        "Create a new {singular}{where}.",
        "Creates {a_singular} and returns it with its new ID.",
        "Add {a_singular}{where}.",
    ),
    "u": (
        "Update an existing {singular}. Only the fields you pass are changed.",
        "Modify the fields of {a_singular}{where}.",
        "Edit {a_singular}: change any of its fields.",
    ),
    "d": (
        "Delete {a_singular}{where}.",
        "Permanently remove {a_singular}.",
        "Deletes the given {singular}{where}.",
    ),
    "s": (
        "Search {plural}{where} by keyword.",
        "Find {plural} matching a text query{where}.",
        "Full-text search over {plural}, best matches first.",
    ),
}
SECOND_SENTENCES = {
    "l": (
        "Results are paginated; pass the returned cursor for the next page.",
        "Use the filters to narrow the results.",
        "Archived ones are left out unless asked for.",
        "",
        "",
    ),
    "g": ("Fails with a not-found error if it does not exist.", "", ""),
    "c": ("Returns the created {singular}.", "Requires write access.", "", ""),
    "u": ("Returns the updated {singular}.", "", ""),
    "d": ("This cannot be undone.", "Requires admin rights.", "", ""),
    "s": ("Supports quoted phrases and field:value filters.", "", ""),
}
PAGING = {
    "cursor": (s("cursor", "Cursor from the previous page's next_cursor"), "limit"),
    "page": (i("page", "Page number, starting at 1", default=1), "per_page"),
    "page_token": (s("page_token", "Token of the page to return, from next_page_token"), "page_size"),
    "offset": (i("start_at", "Index of the first result to return", default=0), "max_results"),
}
MAX_PARAMS = 6


def _cap(word: str) -> str:
    return word[:1].upper() + word[1:]


def _camel(words: list[str]) -> str:
    return words[0] + "".join(_cap(word) for word in words[1:])


def _words(phrase: str) -> list[str]:
    return phrase.replace("-", " ").split()


def _tool_name(server: S, verb: str, noun: list[str], dotted_noun: list[str]) -> str:
    if server.style == "dotted":
        return f"{_camel(dotted_noun)}.{verb}"
    words = [verb, *noun]
    if server.style == "camel":
        return _camel(words)
    if server.style == "kebab":
        return "-".join(words)
    if server.style == "prefixed":
        return "_".join([server.prefix or server.name, *words])
    return "_".join(words)


def _bespoke_name(server: S, words: tuple[str, ...]) -> str:
    if server.style == "dotted":
        return words[0] + ("." + _camel(list(words[1:])) if len(words) > 1 else "")
    if server.style == "camel":
        return _camel(list(words))
    if server.style == "kebab":
        return "-".join(words)
    if server.style == "prefixed":
        return "_".join([server.prefix or server.name, *words])
    return "_".join(words)


def _param_name(server: S, name: str) -> str:
    return _camel(name.split("_")) if server.style in ("camel", "dotted") else name


def _property(field: F) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": field.type}
    if field.description:
        schema["description"] = field.description
    if field.type == "array":
        schema["items"] = {"type": field.items}
    if field.enum:
        schema["enum"] = list(field.enum)
    if field.default is not None:
        schema["default"] = field.default
    return schema


def _object_schema(server: S, fields: list[F], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {_param_name(server, field.name): _property(field) for field in fields},
    }
    names = [_param_name(server, name) for name in required]
    if names:
        schema["required"] = names
    return schema


def _dedupe(fields: list[F]) -> list[F]:
    seen: set[str] = set()
    kept: list[F] = []
    for field in fields:
        if field.name not in seen:
            seen.add(field.name)
            kept.append(field)
    return kept


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _resource_tool(server: S, resource: R, verb: str, rng: random.Random) -> types.Tool:
    context = list(server.context if resource.context is None else resource.context)
    words = dict(server.verbs)
    verb_word = words.get(verb, VERB_WORDS[verb])
    plural_words = _words(resource.plural)
    noun = plural_words if verb in "ls" else _words(resource.singular)
    name = _tool_name(server, verb_word, noun, plural_words)
    where = f" {server.where}" if server.where else f" in {server.product}"
    values = {
        "singular": resource.singular,
        "plural": resource.plural,
        "a_singular": _article(resource.singular),
        "where": where,
        "detail": resource.detail or "all of its fields",
    }
    sentences = [rng.choice(DESCRIPTIONS[verb]).format(**values)]
    second = rng.choice(SECOND_SENTENCES[verb]).format(**values)
    if second:
        sentences.append(second)
    description = " ".join(sentences)
    if rng.random() < 0.25:
        description = f"{server.product[:1].upper()}{server.product[1:]}: {description}"

    page_param, limit_name = PAGING[server.page]
    by_name = {field.name: field for field in resource.fields}
    required: list[str] = [field.name for field in context if field.default is None]
    if verb == "l":
        limit = i(limit_name, f"Maximum number of {resource.plural} to return", default=rng.choice((20, 25, 50, 100)))
        filters = [by_name[f] for f in resource.filters]
        room = MAX_PARAMS - len(context) - 2
        params = [*context, *filters[: max(room, 0)], limit, page_param]
    elif verb == "g":
        assert resource.key is not None
        params = [*context, resource.key]
        required.append(resource.key.name)
    elif verb == "c":
        fields = [
            field
            for field in resource.fields
            if field.name not in resource.filters
            or field.name in [f.name for f in resource.fields[: resource.required]]
        ]
        params = [*context, *fields][:MAX_PARAMS]
        required += [field.name for field in resource.fields[: resource.required]]
    elif verb == "u":
        assert resource.key is not None
        params = [*context, resource.key, *resource.fields][:MAX_PARAMS]
        required.append(resource.key.name)
    elif verb == "d":
        assert resource.key is not None
        params = [*context, resource.key]
        required.append(resource.key.name)
        if rng.random() < 0.2:
            params.append(b("force", "Delete even if other items still refer to it", default=False))
    else:
        query = s("query", f"Text to search for in {resource.plural}")
        limit = i(limit_name, "Maximum number of results", default=rng.choice((10, 20, 50)))
        params = [*context, query, limit]
        required.append("query")
    params = _dedupe(params)
    kept = {field.name for field in params}
    input_schema = _object_schema(server, params, [name for name in dict.fromkeys(required) if name in kept])

    output_schema: dict[str, Any] | None = None
    if verb in "gcu" and resource.key is not None and rng.random() < 0.3:
        record = _dedupe([resource.key, *resource.fields])
        output_schema = _object_schema(server, record, [resource.key.name])
    elif verb in "ls" and rng.random() < 0.2:
        output_schema = {
            "type": "object",
            "properties": {
                resource.plural.replace(" ", "_"): {"type": "array", "items": {"type": "object"}},
                "next_cursor": {"type": ["string", "null"], "description": "Cursor of the next page, null at the end"},
            },
            "required": [resource.plural.replace(" ", "_")],
        }
    return types.Tool(name=name, description=description, input_schema=input_schema, output_schema=output_schema)


def _bespoke_tool(server: S, spec: B) -> types.Tool:
    context = list(server.context) if spec.context else []
    params = _dedupe([*context, *spec.params])
    required = [field.name for field in context if field.default is None] + list(spec.required)
    input_schema = _object_schema(server, params, list(dict.fromkeys(required)))
    output_schema = _object_schema(server, list(spec.output), []) if spec.output else None
    return types.Tool(
        name=_bespoke_name(server, spec.words),
        description=spec.description,
        input_schema=input_schema,
        output_schema=output_schema,
    )


def _server_tools(server: S, seed: int) -> list[types.Tool]:
    tools: list[types.Tool] = []
    for resource in server.resources:
        for verb in resource.verbs:
            rng = random.Random(f"{seed}/{server.name}/{resource.plural}/{verb}")
            tools.append(_resource_tool(server, resource, verb, rng))
    tools.extend(_bespoke_tool(server, spec) for spec in server.bespoke)
    names = [tool.name for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"synthetic server {server.name!r} defines {duplicates} twice")
    return tools


# Servers configured twice under different names, as users do (a second database, an enterprise instance).
INSTANCES = (
    ("github", "github-enterprise", "in a GitHub Enterprise repository"),
    ("postgres", "postgres-analytics", "in the analytics warehouse (PostgreSQL)"),
    ("redis", "redis-cache", "in the Redis cache"),
    ("s3", "s3-backups", "in the backups bucket"),
)


def all_servers() -> list[S]:
    """``SERVERS`` and their second instances."""
    by_name = {server.name: server for server in SERVERS}
    extra = [dataclasses.replace(by_name[base], name=name, where=where) for base, name, where in INSTANCES]
    return [*SERVERS, *extra]


def synthetic_pool(seed: int = 0) -> Catalog:
    """Every synthetic tool there is, each server's together, in the order of ``all_servers()``."""
    return [(server.name, tool) for server in all_servers() for tool in _server_tools(server, seed)]


def synthetic_catalog(n: int, seed: int = 0) -> Catalog:
    """``n`` synthetic tools drawn from the pool by ``seed``, kept in pool order (each server's tools together)."""
    pool = synthetic_pool(seed)
    if not 0 <= n <= len(pool):
        raise ValueError(f"the synthetic pool has {len(pool)} tools; cannot draw {n}")
    chosen = sorted(random.Random(f"draw/{seed}").sample(range(len(pool)), n))
    return [pool[index] for index in chosen]


def mixed_catalog(n: int, seed: int = 0) -> Catalog:
    """The real tools plus ``n - 52`` synthetic ones; each server's tools together, servers in a seeded order."""
    real = real_catalog()
    if n < len(real):
        raise ValueError(f"a mixed catalog holds at least the {len(real)} real tools; asked for {n}")
    combined = real + synthetic_catalog(n - len(real), seed)
    servers = list(dict.fromkeys(server for server, _ in combined))
    random.Random(f"order/{seed}").shuffle(servers)
    rank = {server: position for position, server in enumerate(servers)}
    return sorted(combined, key=lambda pair: rank[pair[0]])  # stable: each server keeps its listing order


def search_text(tool: types.Tool) -> str:
    """Name, description, and every parameter's name and description: what the BM25 baseline indexes."""
    parts = [tool.name, tool.description or ""]
    properties = tool.input_schema.get("properties")
    if isinstance(properties, dict):
        for name, schema in properties.items():
            parts.append(str(name))
            if isinstance(schema, dict) and isinstance(schema.get("description"), str):
                parts.append(schema["description"])
    return " ".join(parts)


_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """Lowercase alphanumeric runs: the BM25 baseline's tokenizer (no stemming, no splitting of camelCase)."""
    return _TOKEN.findall(text.lower())
