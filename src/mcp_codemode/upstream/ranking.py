"""Ranked tool search: which of every configured server's tools does a query like "ls a folder" mean?

A model asks in its own words, not in the tool's. Plain BM25 over descriptions misses "mkdir" (the tool says
"create directory"), "ls" and "serach"; the reference bridge's substring filter misses nearly everything.
So this is BM25F (each field of a tool has its own weight and length normalisation) over word stems, with
each query word widened into weighted alternatives: its own stem, other forms of the word (listing/list),
the synonyms tool vocabularies use (fetch/get/download), expansions of shell and jargon abbreviations
(mkdir → create directory), words it is a prefix of (dir → directory), and near-miss spellings (rapidfuzz's
Damerau-Levenshtein over the catalog's vocabulary). A query word scores its best alternative; a tool whose
name the query covers gets a bonus, and one that answers only some of the query's words is damped.

Everything a query needs is precomputed per catalog: BM25F weights per (term, tool), so a query costs a few
dictionary lookups per alternative (well under a millisecond at 1,000 tools). The index is rebuilt only when
a listing changes.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import re
from collections import defaultdict
from collections.abc import Callable, Container, Iterable, Sequence

from mcp import types
from rapidfuzz import process
from rapidfuzz.distance import DamerauLevenshtein

# Field weights and length normalisation. The name says what a tool does; the first sentence of its
# description usually restates it; the rest of the description and the parameters add vocabulary; the
# server's name and description say which world the tool lives in ("git", "memory"), but weakly: a server's
# name is often an everyday word ("everything", "time", "memory") that a query uses in another sense.
_FIELDS: dict[str, tuple[float, float]] = {  # field: (weight, b)
    "name": (5.0, 0.3),
    "lead": (1.2, 0.5),
    "description": (1.0, 0.75),
    "parameters": (0.5, 0.6),
    "server": (0.5, 0.3),
}
_K1 = 1.2
# Weights of a query word's alternatives: the word itself beats another form of it, which beats a synonym.
_EXACT, _FORM, _SYNONYM, _EXPANSION, _PREFIX, _FUZZY = 1.0, 0.9, 0.75, 0.9, 0.6, 0.7
_NAME_BONUS = 0.6  # the most a score grows for a tool whose whole name the query covers (in part: in part)
_NAMED_SERVER = 2.0  # the factor for tools of a server the query names as a prefix ("memory: ...")
_FLOOR = 0.1  # hits scoring under this share of the best hit are noise, not matches
_MAX_QUERY_WORDS = 24

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
get fetch retrieve obtain download grab pull load
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
tree hierarchy nested recursive structure
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
_EXPANSIONS: dict[str, tuple[str, ...]] = {
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
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_QUOTED = re.compile(r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|`[^`]*`")
_CLOCK = re.compile(r"\b\d{1,2}(?::\d{2})?\s*[ap]\.?m\b|\b\d{1,2}:\d{2}\b", re.IGNORECASE)
_TIME_ZONE = re.compile(
    r"\b(?:Africa|America|Antarctica|Asia|Atlantic|Australia|Europe|Indian|Pacific|Etc)/[A-Za-z_+-]+"
)
_SERVER_PREFIX = re.compile(r"^\s*([\w.-]+)\s*:(?!//)")
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
    of the query word instead (see ``_forms``), where a wrong guess costs nothing unless the catalog has it.
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
    zone (Asia/Tokyo) for "timezone", and quoted text ('bump version to 1.2') is left out."""
    unquoted = _QUOTED.sub(" ", query)
    if unquoted.strip():  # quoted text is data (a commit message, a fact), unless it is the whole query
        query = unquoted
    query = _CLOCK.sub(" time ", _TIME_ZONE.sub(" timezone ", _URL.sub(" url ", query)))
    query = _DIRECTORY.sub(" directory ", _FILE_NAME.sub(" file ", query))
    for phrase, meaning in _PHRASES:
        query = phrase.sub(meaning, query)
    return terms(query)


def _forms(word: str) -> frozenset[str]:
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


_SYNONYMS = _build_synonyms()
_THESAURUS = frozenset(_SYNONYMS) | frozenset(_EXPANSIONS)


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One searchable tool: the server it belongs to, its listing, and the server's description if any."""

    server: str
    tool: types.Tool
    server_description: str = ""


def _fields(entry: Entry) -> dict[str, list[str]]:
    tool = entry.tool
    description = (tool.description or "").strip()
    lead = _SENTENCE_END.split(description.split("\n", 1)[0], maxsplit=1)[0] if description else ""
    parameters: list[str] = []
    properties = (tool.input_schema or {}).get("properties")
    if isinstance(properties, dict):
        for name, prop in properties.items():
            parameters += terms(str(name))
            if isinstance(prop, dict) and isinstance(prop.get("description"), str):
                parameters += terms(prop["description"])
    return {
        "name": terms(tool.name) + terms(tool.title or ""),
        "lead": terms(lead),
        "description": terms(description),
        "parameters": parameters,
        "server": terms(entry.server) + terms(entry.server_description),
    }


@dataclasses.dataclass(frozen=True, slots=True)
class _Alternative:
    weight: float
    words: tuple[str, ...]


class Ranker:
    """A search index over one catalog; build it once per catalog version, query it any number of times."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = list(entries)
        fields = [_fields(entry) for entry in self.entries]
        _split_compound_names(fields)
        count = max(len(fields), 1)
        average = {name: max(sum(len(f[name]) for f in fields) / count, 1.0) for name in _FIELDS}
        weighted: dict[str, dict[int, float]] = defaultdict(dict)
        for index, doc in enumerate(fields):
            for name, words in doc.items():
                if not words:
                    continue
                weight, b = _FIELDS[name]
                norm = 1 - b + b * len(words) / average[name]
                counts: dict[str, int] = defaultdict(int)
                for word in words:
                    counts[word] += 1
                for word, tf in counts.items():
                    postings = weighted[word]
                    postings[index] = postings.get(index, 0.0) + weight * tf / norm
        # Precomputed BM25F contribution of each term to each tool: idf × saturated weighted frequency.
        self._postings: dict[str, dict[int, float]] = {}
        for word, postings in weighted.items():
            idf = math.log(1 + (len(fields) - len(postings) + 0.5) / (len(postings) + 0.5))
            self._postings[word] = {index: idf * tf * (_K1 + 1) / (_K1 + tf) for index, tf in postings.items()}
        self._vocabulary = sorted(self._postings)
        # Near-miss candidates, by length (a misspelling differs little in length): the catalog's words and the
        # thesaurus's, whose readings lead back into the catalog.
        self._by_length: dict[int, list[str]] = defaultdict(list)
        for word in sorted(set(self._vocabulary) | _THESAURUS):
            self._by_length[len(word)].append(word)
        # Which tools' names hold a term: a tool whose every name word the query covers gets a bonus.
        # The server's own name is left out: git_commit is named "commit" as far as a query about git goes.
        self._names = [_name_words(entry) for entry in self.entries]
        self._in_names: dict[str, list[int]] = defaultdict(list)
        for index, tool_name in enumerate(self._names):
            for term in tool_name:
                self._in_names[term].append(index)

    def __len__(self) -> int:
        return len(self.entries)

    def search(self, query: str) -> list[tuple[float, int]]:
        """Every tool that matches, best first, as (score, index into the entries); ties keep listing order."""
        words = query_terms(query)[:_MAX_QUERY_WORDS]
        if not words or not self.entries:
            return []
        # "git: show staged changes" names the server: its tools are what the agent means.
        prefix = _SERVER_PREFIX.match(query)
        named = prefix.group(1).lower() if prefix else ""
        scores: dict[int, float] = defaultdict(float)
        answered: dict[int, int] = defaultdict(int)
        covered: dict[int, dict[str, float]] = defaultdict(dict)  # name word: best weight it was matched with
        for word in dict.fromkeys(words):
            best: dict[int, float] = {}
            for alternative in self._alternatives(word):
                totals = self._score_words(alternative.words)
                for index, value in totals.items():
                    value *= alternative.weight
                    if value > best.get(index, 0.0):
                        best[index] = value
                for term in alternative.words:
                    for index in self._in_names.get(term, ()):
                        if alternative.weight > covered[index].get(term, 0.0):
                            covered[index][term] = alternative.weight
            for index, value in best.items():
                scores[index] += value
                answered[index] += 1
        unique = len(dict.fromkeys(words))
        ranked = []
        for index, score in scores.items():
            score *= (answered[index] / unique) ** 0.5
            if named and self.entries[index].server.lower() == named:
                score *= _NAMED_SERVER
            tool_name = self._names[index]
            if tool_name and covered[index]:
                score *= 1 + _NAME_BONUS * sum(covered[index].values()) / len(tool_name)
            ranked.append((score, index))
        if not ranked:
            return []
        ranked.sort(key=lambda hit: (-hit[0], hit[1]))
        floor = ranked[0][0] * _FLOOR
        return [hit for hit in ranked if hit[0] >= floor]

    def _score_words(self, words: tuple[str, ...]) -> dict[int, float]:
        if len(words) == 1:
            return self._postings.get(words[0], {})
        totals: dict[int, float] = defaultdict(float)
        for word in words:
            for index, value in self._postings.get(word, {}).items():
                totals[index] += value / len(words) ** 0.5
        return totals

    def _alternatives(self, word: str) -> list[_Alternative]:
        """The weighted readings of one query word that this catalog's vocabulary can match."""
        known = self._postings
        found: dict[tuple[str, ...], float] = {}

        def offer(weight: float, words: Iterable[str]) -> None:
            key = tuple(words)
            if key and all(w in known for w in key) and weight > found.get(key, 0.0):
                found[key] = weight

        self._readings(word, 1.0, offer)
        if len(word) >= 3:
            start = bisect.bisect_left(self._vocabulary, word)
            for candidate in self._vocabulary[start : start + 8]:
                if not candidate.startswith(word):
                    break
                if candidate != word:
                    offer(_PREFIX * (len(word) / len(candidate)) ** 0.5, (candidate,))
        if word not in known and word not in _THESAURUS and len(word) >= 4:
            for parts in _split_compound(word, known):
                offer(_FORM, parts)
            # A misspelling of a catalog word, or of a word the thesaurus knows ("webapge" → webpage → url).
            limit = 1 if len(word) <= 6 else 2
            sizes = range(len(word) - limit, len(word) + limit + 1)
            nearby = [known_word for size in sizes for known_word in self._by_length.get(size, ())]
            for candidate, distance, _ in process.extract(
                word, nearby, scorer=DamerauLevenshtein.distance, score_cutoff=limit, limit=3
            ):
                self._readings(candidate, _FUZZY * (1 - distance / (limit + 1)), offer)
        return [_Alternative(weight, words) for words, weight in found.items()]

    @staticmethod
    def _readings(word: str, weight: float, offer: Callable[[float, Iterable[str]], None]) -> None:
        """The word itself, its other forms, its synonyms and what it abbreviates, each with its weight."""
        offer(weight * _EXACT, (word,))
        for synonym in _SYNONYMS.get(word, ()):
            offer(weight * _SYNONYM, (synonym,))
        for form in _forms(word):  # connect → connection → relation
            offer(weight * _FORM, (form,))
            for synonym in _SYNONYMS.get(form, ()):
                offer(weight * _FORM * _SYNONYM, (synonym,))
        for phrase in _EXPANSIONS.get(word, ()):
            expanded = tuple(terms(phrase))
            offer(weight * _EXPANSION, expanded)
            for part in expanded:  # half an expansion still says something
                offer(weight * _EXPANSION * 0.6, (part,))


def _split_compound(word: str, known: Container[str]) -> list[tuple[str, str]]:
    """Two known words a compound is made of: timezone → time zone, readfile → read file."""
    return [(word[:cut], word[cut:]) for cut in range(3, len(word) - 2) if word[:cut] in known and word[cut:] in known]


def _name_words(entry: Entry) -> frozenset[str]:
    words = frozenset(terms(entry.tool.name))
    return words - frozenset(terms(entry.server)) or words


def _split_compound_names(fields: list[dict[str, list[str]]]) -> None:
    """Give a run-together name (sequentialthinking) its parts as name words too, when the catalog knows them."""
    vocabulary = {word for doc in fields for words in doc.values() for word in words}
    for doc in fields:
        extra: list[str] = []
        for word in doc["name"]:
            if len(word) >= 8:
                splits = _split_compound(word, vocabulary)
                if splits:
                    extra += max(splits, key=lambda parts: min(map(len, parts)))
        doc["name"] += extra
