"""Ranked tool search: which of every configured server's tools does a query like "ls a folder" mean?

A model asks in its own words, not in the tool's. Plain BM25 over descriptions misses "mkdir" (the tool says
"create directory"), "ls" and "serach"; the reference bridge's substring filter misses nearly everything.
So this is BM25F (each field of a tool has its own weight and length normalisation) over word stems, with
each query word widened into weighted alternatives: its own stem, other forms of the word (listing/list),
the synonyms tool vocabularies use (fetch/get/download), expansions of shell and jargon abbreviations
(mkdir → create directory), words it is a prefix of (dir → directory), and near-miss spellings (rapidfuzz's
Damerau-Levenshtein over the catalog's vocabulary, the commoner word preferred). A query word scores its best
alternative; a tool whose name the query covers gets a bonus, and one that answers only some of the query's
words is damped.

What is ranked is a ``Document``: a name, a title, a description, parameters and the group it belongs to. A
tool is one (``Entry`` adapts a server's ``types.Tool``), and so is anything else searched the same way (the
prompts and resources of ``extras.py``; a registry's servers, whose packages' environment variables play the
parameters and whose namespace the group).

Everything a query needs is precomputed per catalog: BM25F weights per (term, tool), so a query costs a few
dictionary lookups per alternative (well under a millisecond at 1,000 tools). The index is rebuilt only when
a listing changes. How words are read (stems, stop words, synonyms, expansions) is in ``words.py``.
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

from .words import EXPANSIONS, SYNONYMS, THESAURUS, prepare, query_terms, terms, word_forms

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
_EXACT, _FORM, _SYNONYM, _EXPANSION, _PREFIX, _FUZZY = 1.0, 0.9, 0.75, 0.9, 0.6, 0.8
# A near miss at two edits counts this much of one at one edit; the commoner of the near words is the likelier
# reading, by (tools using it / tools using the commonest) to this power.
_FUZZ_DISTANCE, _FUZZ_PRIOR = 0.5, 0.3
_NAME_BONUS = 0.6  # the most a score grows for a tool whose whole name the query covers (in part: in part)
_NAMED_SERVER = 2.0  # the factor for tools of a server the query names as a prefix ("memory: ...")
_FLOOR = 0.1  # hits scoring under this share of the best hit are noise, not matches
_MAX_QUERY_WORDS = 24

_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_SERVER_PREFIX = re.compile(r"^\s*([\w.-]+)\s*:(?!//)")


@dataclasses.dataclass(frozen=True, slots=True)
class Document:
    """What the ranker reads of one searchable thing, whatever it is (a tool, a prompt, a registry's server).

    ``group`` is what it belongs to (a tool's server, a registry server's namespace): a query that names the
    group ("git: ...") prefers its documents, and the group's words in ``name`` are not counted as the name.
    ``parameters`` are (name, description) pairs: what the thing takes or needs.
    """

    name: str
    description: str = ""
    title: str = ""
    parameters: tuple[tuple[str, str], ...] = ()
    group: str = ""
    group_description: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Entry:
    """One searchable tool: the server it belongs to, its listing, and the server's description if any."""

    server: str
    tool: types.Tool
    server_description: str = ""

    def document(self) -> Document:
        parameters: list[tuple[str, str]] = []
        properties = (self.tool.input_schema or {}).get("properties")
        if isinstance(properties, dict):
            for name, prop in properties.items():
                described = prop.get("description") if isinstance(prop, dict) else None
                parameters.append((str(name), described if isinstance(described, str) else ""))
        return Document(
            name=self.tool.name,
            description=self.tool.description or "",
            title=self.tool.title or "",
            parameters=tuple(parameters),
            group=self.server,
            group_description=self.server_description,
        )


def _fields(document: Document) -> dict[str, list[str]]:
    description = document.description.strip()
    lead = _SENTENCE_END.split(description.split("\n", 1)[0], maxsplit=1)[0] if description else ""
    parameters: list[str] = []
    for name, described in document.parameters:
        parameters += terms(name) + terms(described)
    return {
        "name": terms(document.name) + terms(document.title),
        "lead": terms(lead),
        "description": terms(description),
        "parameters": parameters,
        "server": terms(document.group) + terms(document.group_description),
    }


@dataclasses.dataclass(frozen=True, slots=True)
class _Alternative:
    weight: float
    words: tuple[str, ...]


class Ranker:
    """A search index over one catalog; build it once per catalog version, query it any number of times."""

    def __init__(self, entries: Sequence[Entry | Document]) -> None:
        prepare()
        self.documents = [entry.document() if isinstance(entry, Entry) else entry for entry in entries]
        fields = [_fields(document) for document in self.documents]
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
        for word in sorted(set(self._vocabulary) | THESAURUS):
            self._by_length[len(word)].append(word)
        # Which tools' names hold a term: a tool whose every name word the query covers gets a bonus.
        # The server's own name is left out: git_commit is named "commit" as far as a query about git goes.
        self._names = [_name_words(document) for document in self.documents]
        self._in_names: dict[str, list[int]] = defaultdict(list)
        for index, tool_name in enumerate(self._names):
            for term in tool_name:
                self._in_names[term].append(index)

    def __len__(self) -> int:
        return len(self.documents)

    def search(self, query: str) -> list[tuple[float, int]]:
        """Every tool that matches, best first, as (score, index into the entries); ties keep listing order."""
        words = query_terms(query)[:_MAX_QUERY_WORDS]
        if not words or not self.documents:
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
            if named and self.documents[index].group.lower() == named:
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
        if word not in known and word not in THESAURUS and len(word) >= 4:
            for parts in _split_compound(word, known):
                offer(_FORM, parts)
            # A misspelling of a catalog word, or of a word the thesaurus knows ("webapge" → webpage → url).
            limit = 1 if len(word) <= 6 else 2
            sizes = range(len(word) - limit, len(word) + limit + 1)
            nearby = [known_word for size in sizes for known_word in self._by_length.get(size, ())]
            near = process.extract(word, nearby, scorer=DamerauLevenshtein.distance, score_cutoff=limit, limit=3)
            # The likelier reading of a misspelling is the commoner word (a noisy channel with the catalog's
            # word frequencies as the prior): "crate" is "create" far more often than "rate".
            commonest = max((self._frequency(candidate) for candidate, _, _ in near), default=0)
            for candidate, distance, _ in near:
                prior = ((self._frequency(candidate) + 1) / (commonest + 1)) ** _FUZZ_PRIOR
                self._readings(candidate, _FUZZY * _FUZZ_DISTANCE ** (distance - 1) * prior, offer)
        return [_Alternative(weight, words) for words, weight in found.items()]

    def _frequency(self, word: str) -> int:
        """How many tools use a word; a thesaurus word the catalog lacks counts as its commonest synonym."""
        postings = self._postings.get(word)
        if postings is not None:
            return len(postings)
        return max((len(self._postings.get(synonym, ())) for synonym in SYNONYMS.get(word, ())), default=0)

    @staticmethod
    def _readings(word: str, weight: float, offer: Callable[[float, Iterable[str]], None]) -> None:
        """The word itself, its other forms, its synonyms and what it abbreviates, each with its weight."""
        offer(weight * _EXACT, (word,))
        for synonym in SYNONYMS.get(word, ()):
            offer(weight * _SYNONYM, (synonym,))
        for form in word_forms(word):  # connect → connection → relation
            offer(weight * _FORM, (form,))
            for synonym in SYNONYMS.get(form, ()):
                offer(weight * _FORM * _SYNONYM, (synonym,))
        for phrase in EXPANSIONS.get(word, ()):
            expanded = tuple(terms(phrase))
            offer(weight * _EXPANSION, expanded)
            for part in expanded:  # half an expansion still says something
                offer(weight * _EXPANSION * 0.6, (part,))


def _split_compound(word: str, known: Container[str]) -> list[tuple[str, str]]:
    """Two known words a compound is made of: timezone → time zone, readfile → read file."""
    return [(word[:cut], word[cut:]) for cut in range(3, len(word) - 2) if word[:cut] in known and word[cut:] in known]


def _name_words(document: Document) -> frozenset[str]:
    words = frozenset(terms(document.name))
    return words - frozenset(terms(document.group)) or words


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
