"""How the words of a tool and of a query are read: splitting, stems, stop words, synonyms and expansions.

The ranker (``ranking.py``) scores tools by the terms these functions make, and widens a query word into the
readings this vocabulary knows. Apart from the scorer because it is a different job with a different rhythm of
change: this module is language (word lists a person extends when a query finds the wrong tool, and the
rules that turn a name, a description or a query into terms), while the ranker is arithmetic over those terms
(BM25F weights, bonuses, the fuzzy-match budget) and changes when the scoring does.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from collections import defaultdict

_STOP_WORDS = """a an and or the of to in on for with from by at as is are be been it its this that these those me my i
    we our you your please can could would should will do does did how what which who whom whose where when why
    some any all into onto via using use tool tools mcp want need let lets there here also just then than so if
    whether"""
_STOP = frozenset(_STOP_WORDS.split())

# Words tool vocabularies use for the same act or thing. Each line is one group; a word may sit in several.
_SYNONYM_GROUPS = """
list enumerate browse ls
show display view print
directory folder dir
create make new add generate
delete remove erase destroy drop unlink rm del trash purge forget
get fetch retrieve obtain download grab pull load scrape crawl
read open view cat contents load show
write save store put persist record dump overwrite
edit modify update change patch alter replace
search find lookup locate query grep look seek filter match
move rename mv relocate
copy duplicate cp clone
run execute exec invoke call launch start trigger
stop kill terminate halt cancel abort
send post deliver notify
file document doc
image picture photo pic img screenshot
url link webpage website page web site http https internet
time clock now current datetime date today hour minute
timezone tz zone
convert translate transform
diff difference changes compare delta
log history
commit checkin
staged staging stage cached index
add append attach tack insert include
undo revert reset unstage rollback restore clear discard
status modified uncommitted untracked dirty
branch branches
status state
info information metadata stat stats details properties attributes
size length bytes
tree hierarchy nested recursive structure outline
entity node object item
relation relationship edge connection link
observation fact note
memory knowledge graph remember recall
think thinking reason reasoning reflect thought step steps plan
echo repeat ping
sum add total plus calculate arithmetic math
error fail failure exception
environment env variables
head first top beginning
tail last end bottom
init initialize initialise setup bootstrap
allowed permitted accessible
multiple many several batch bulk
compress zip gzip shrink archive
fake simulated simulate mock dummy
""".strip().splitlines()

# Phrases whose words mean little alone: "change the name" is a rename, "disk space" a size.
_PHRASES = [
    (re.compile(rf"\b{pattern}\b", re.IGNORECASE), f" {meaning} ")
    for pattern, meaning in (
        (r"change (?:the |its |their )?names?", "rename"),
        (r"disk (?:space|usage)|space used|how big|how large", "size"),
        (r"what time|time is it", "current time"),
        (r"where (?:is|are|do|does|did)", "find"),
        (r"switch to|go to|hop (?:over )?to|move to (?=\S+ branch)", "checkout"),
    )
]

# Shell commands and jargon: one word standing for a phrase the tools spell out.
EXPANSIONS: dict[str, tuple[str, ...]] = {
    "mkdir": ("create directory",),
    "rmdir": ("remove directory",),
    "ls": ("list directory", "list"),
    "dir": ("directory", "list directory"),
    "pwd": ("current directory",),
    "cwd": ("current directory",),
    "mv": ("move file", "move"),
    "cp": ("copy file", "copy"),
    "rm": ("delete file", "delete"),
    "cat": ("read file",),
    "grep": ("search file", "search"),
    "wget": ("fetch url", "download"),
    "curl": ("fetch url",),
    "tz": ("timezone",),
    "repo": ("repository",),
    "config": ("configuration",),
    "cfg": ("configuration",),
    "db": ("database",),
    "env": ("environment",),
    "msg": ("message",),
    "img": ("image",),
    "pic": ("image",),
    "stat": ("file info", "metadata"),
    "du": ("size",),
    "tmp": ("temporary",),
    "md": ("markdown",),
    "info": ("information",),
    "todo": ("task",),
    "kg": ("knowledge graph",),
    "llm": ("sampling", "model"),
}

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NON_ALNUM = re.compile(r"[^0-9A-Za-z]+")
_QUOTED = re.compile(r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|`[^`]*`")
_CLOCK = re.compile(r"\b\d{1,2}(?::\d{2})?\s*[ap]\.?m\b|\b\d{1,2}:\d{2}\b", re.IGNORECASE)
_TIME_ZONE = re.compile(
    r"\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)/[A-Za-z_+-]+"
)
_ENV_VAR = re.compile(r"\$\{?[A-Za-z_]\w*\}?|(?<![\w$])[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?!\w)")
# The time-zone database's cities, less its research stations (Antarctica, named after people) and the places
# whose names are also ordinary words or abbreviations (Australia/North, Indian/Christmas, Australia/ACT).
_PLACE_AREAS = ("Africa", "America", "Asia", "Atlantic", "Australia", "Europe", "Indian", "Pacific")
_PLACE_WORD = re.compile(r"[A-Za-z]+(?:-[A-Za-z]+)*")
_NOT_PLACES = frozenset(
    {"center", "north", "south", "west", "christmas", "easter", "reunion", "wake", "midway", "resolute", "oral"}
    | {"virgin", "victoria", "regina"}
)
# A commit as git names it: an ancestor of HEAD (HEAD~3, HEAD^), an abbreviated or full hash (seven hex digits or
# more, letters and digits both), and ranges of them (HEAD~3..HEAD). HEAD alone stays a word (an HTTP HEAD).
_REF = r"(?:\.\.\.?(?:HEAD|[\w/.-]+)(?:[~^]\d*)*)"
_REVISION = re.compile(
    rf"(?<![\w.~^/#-])(?:(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{{7,40}}(?:[~^]\d*)*{_REF}?"
    rf"|HEAD(?:(?:[~^]\d*)+{_REF}?|{_REF}))(?![\w~^-])"
)
_URL = re.compile(r"\b(?:https?|ftp)://\S+|\bwww\.\S+", re.IGNORECASE)
_FILE_NAME = re.compile(
    r"(?<![\w./~*-])(?:[~.]?/[\w.@~/*-]*[\w*]|(?:[\w.*-]+/)*[\w*-]+(?:\.[\w*-]+)*\.[A-Za-z][A-Za-z0-9]{1,4})(?![\w/])"
)
_DIRECTORY = re.compile(r"(?<![\w./~-])[~.]?[\w./-]*/(?![\w/])")


def split_words(text: str) -> list[str]:
    """Lower-case words of a name or text, split on snake_case, camelCase (HTTPServer too), kebab-case and dots."""
    return [word.lower() for word in _NON_ALNUM.split(_CAMEL.sub(" ", text or "")) if word]


def stem(word: str) -> str:
    """A plural's singular (files → file, directories → directory, branches → branch); other words as they are.

    Only plurals: the tools' own vocabulary is mostly base forms, and other forms are tried as alternatives
    of the query word instead (see ``word_forms``), where a wrong guess costs nothing unless the catalog has it.
    """
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is", "os")):
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes", "zes")):
        return word[:-2]
    return word[:-1]


def terms(text: str) -> list[str]:
    """The index terms of a text: stems of its words, without stop words and stray letters (what's → what)."""
    stems = (stem(word) for word in split_words(text) if word not in _STOP)
    return [word for word in stems if word not in _STOP and (len(word) > 1 or word.isdigit())]


def query_terms(query: str) -> list[str]:
    """A query's terms. What the agent works on is data, not a description of the tool: a URL stands for the
    word "url", a file name or path for "file" (config.yaml is no config tool), a clock time for "time", an IANA
    zone (Asia/Tokyo) for "timezone", a variable's name (OPENAI_API_KEY, $HOME) for "environment variable", a
    city (Tokyo, New York) adds "timezone", git's name of a commit (HEAD~3, a hash, a range of them) stands for
    "commit", and quoted text ('bump version to 1.2') is left out. Two places or zones in one request add
    "convert": naming both ends asks what a time in one is in the other."""
    unquoted = _QUOTED.sub(" ", query)
    if unquoted.strip():  # quoted text is data (a commit message, a fact), unless it is the whole query
        query = unquoted
    query, zones = _TIME_ZONE.subn(" timezone ", _URL.sub(" url ", query))
    query = _CLOCK.sub(" time ", query)
    query = _REVISION.sub(" commit ", query)
    query = _ENV_VAR.sub(" environment variable ", query)
    query, places = _mark_places(_DIRECTORY.sub(" directory ", _FILE_NAME.sub(" file ", query)))
    if zones + places >= 2:
        query += " convert "
    for phrase, meaning in _PHRASES:
        query = phrase.sub(meaning, query)
    return terms(query)


def prepare() -> None:
    """Read what queries need from the host (the time-zone database's places) now, not in the first query.

    The ranker calls it while building an index, which runs in a worker thread: walking the time-zone
    directory takes tens of milliseconds that a search on the event loop should not pay.
    """
    _places()


@functools.cache
def _places() -> dict[str, str]:
    """The cities of the IANA time-zone database (Tokyo, New York, Sao Paulo), by their lower-cased words.

    The host's own time-zone data (the tzdata package where it has none) decides which places are known;
    with no data, none are.
    """
    names = {
        zone.rsplit("/", 1)[-1].replace("_", " ")
        for zone in zoneinfo.available_timezones()
        if zone.split("/", 1)[0] in _PLACE_AREAS and "/" in zone
    }
    return {
        name.lower().replace("-", " "): name for name in names if not name.isupper() and name.lower() not in _NOT_PLACES
    }


def _mark_places(query: str) -> tuple[str, int]:
    """Each place in a query stays a word of it (a tool may be named after it), joined, and adds "timezone";
    with how many places there were.

    A place says the agent asks about where something happens, which for tools means a time zone far more
    often than anything else ("3pm in Chicago"). A name of four letters or fewer counts only when written
    capitalised (Rome, Lima; not "lima beans").
    """
    places = _places()
    words = list(_PLACE_WORD.finditer(query))
    keys = [word.group(0).lower().replace("-", " ") for word in words]
    found: list[tuple[int, int, str]] = []
    position = 0
    while position < len(words):
        for size in (3, 2, 1):
            key = " ".join(keys[position : position + size])
            name = places.get(key) if position + size <= len(words) else None
            if name is not None:
                start, end = words[position].start(), words[position + size - 1].end()
                if len(name) > 4 or query[start:end] == name:
                    found.append((start, end, key.replace(" ", "")))
                    position += size
                    break
        else:
            position += 1
    for start, end, joined in reversed(found):
        query = f"{query[:start]} {joined} timezone {query[end:]}"
    return query, len(found)


def word_forms(word: str) -> frozenset[str]:
    """Other forms a word may take in a tool's text: listing/list, created/create, staged/staging, writer/write."""
    bases = {word}
    for suffix in ("ing", "ed", "er", "ion", "ions", "ation", "ations", "s", "es", "ment", "al", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            base = word[: -len(suffix)]
            bases.update((base, base + "e"))
            if len(base) > 3 and base[-1] == base[-2]:
                bases.add(base[:-1])  # running → run
            if base.endswith("i"):
                bases.add(base[:-1] + "y")  # copied → copy
    forms = set(bases)
    for base in bases:
        for suffix in ("ing", "ed", "s", "ion", "ation", "er"):
            forms.add(base + suffix)
            if base.endswith("e"):
                forms.add(base[:-1] + suffix)  # stage → staging
    forms.discard(word)
    return frozenset(stem(form) for form in forms)


def _build_synonyms() -> dict[str, set[str]]:
    synonyms: dict[str, set[str]] = defaultdict(set)
    for line in _SYNONYM_GROUPS:
        group = {stem(word) for word in line.split()}
        for word in group:
            synonyms[word] |= group - {word}
    return dict(synonyms)


SYNONYMS = _build_synonyms()
THESAURUS = frozenset(SYNONYMS) | frozenset(EXPANSIONS)
