"""Known failures to compare an unfamiliar log with: the knowledge base's quoted error text and the labelled
corpus's train cases (evals/corpus/, never a held-out case).

Two readings, weakest last:
- `structural`: a failure of the log has the same exception type and nearly the same message template as a
  known failure of some cause (numbers, paths, hosts, ports, sizes abstracted);
- `similar`: BM25 (the `bm25s` library) ranks the known documents, one per entry and one per corpus case,
  against the log's error lines; each of the best few documents votes for its cause (an entry's vote counting
  double), and the causes with the most votes are candidates to confirm.
The documents' failures and tokens are prepared once and kept in the user's cache (retrieval_cache: 0.7 s of a
small log's 1.1 s diagnosis); the BM25 index over them is built in memory on first use (milliseconds).
Its settings were chosen by cross-validation on the train split (distdoctor/evals/retrieval_cv.py): low `k1`
and `b` (a line repeated by every rank, and a long log, say little more than once), word pairs beside words,
and votes summed over the top documents rather than the best document per cause.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from distdoctor import paths
from distdoctor.diagnose.structure import Failure, error_lines, failure_of_text, similarity, tokens
from distdoctor.knowledge import load_entries

STRUCTURAL_MIN = 0.6   # template overlap (Jaccard, same exception type) that counts as the same failure
CORPUS_DOC_CHARS = 20000  # of a corpus log indexed (its head: where an excerpt puts the error)
SIMILAR_TOP = 3        # causes taken from retrieval
SIMILAR_MIN = 0.1      # a cause with under this share of the best cause's votes is not similar enough
BM25_K1, BM25_B = 0.5, 0.3  # term-frequency saturation and length normalisation (cross-validated)
NEIGHBOURS = 10        # documents that vote for their cause
ENTRY_WEIGHT = 2.0     # a knowledge-base entry's vote against one corpus case's
SHARE_POWER = 2.0      # a neighbour votes with (its score / the best score) ** this
_EXCLUDED: set[str] = set()
_CORPUS_ROOT: list[str | None] = [None]  # None: evals/corpus/ of this checkout


@dataclass(frozen=True)
class Known:
    cause: str
    where: str          # references/x.md#cause or the corpus case's URL
    doc_id: str         # entry:<cause> or corpus:<case id>
    failure: Failure


@dataclass(frozen=True)
class Match:
    cause: str
    where: str
    doc_id: str
    score: float
    text: str           # the known failure's line (structural) or the document's best line (similar)


# Words every traceback and launcher banner has: they say nothing about the failure.
_BOILERPLATE = frozenset("traceback most recent call last file line module".split())
_LIBRARY = re.compile(r"[\\/](?:site|dist)-packages[\\/]|[\\/]lib[\\/]python[\d.]*[\\/]")
_FRAME_AT = re.compile(r'File "(?P<path>[^"]*)", line \d+, in (?P<fn>[\w<>.]+)')


def retrieval_tokens(text: str) -> list[str]:
    """Tokens for BM25: a traceback frame gives its file's stem and function (`c10d_rendezvous_backend`,
    `_call_store`: where it failed, which the message template abstracts away); other lines their template
    tokens without the traceback boilerplate, and each pair of neighbouring tokens (`connection_reset`: a
    phrase says more than its words)."""
    out: list[str] = []
    for line in text.splitlines():
        m = _FRAME_AT.search(line)
        if m:
            if _LIBRARY.search(m["path"]):
                stem = re.split(r"[\\/]", m["path"])[-1].rsplit(".", 1)[0].lower()
                out += [stem, m["fn"].lower()]
            continue
        words = [t for t in tokens(line) if t not in _BOILERPLATE]
        out += words + [f"{a}_{b}" for a, b in zip(words, words[1:])]
    return out


def use_corpus(root: str | Path | None) -> None:
    """Index another corpus folder's train split (the evals' --corpus); None: evals/corpus/."""
    _CORPUS_ROOT[0] = str(root) if root else None


@contextmanager
def excluding(doc_ids: set[str]):
    """Leave some documents out (scoring a train case must not find the case itself)."""
    saved = set(_EXCLUDED)
    _EXCLUDED.update(doc_ids)
    try:
        yield
    finally:
        _EXCLUDED.clear()
        _EXCLUDED.update(saved)


def documents(references_root: str, corpus_root: str | None) -> list[tuple[str, str, str, str]]:
    """(doc id, cause, where, text) for every entry and every train corpus case."""
    from distdoctor.corpus import train_cases

    docs = []
    for e in load_entries(Path(references_root)):
        text = "\n".join([e.title, e.section("Symptom")] + [q.text for q in e.quotes])
        docs.append((f"entry:{e.cause}", e.cause, e.anchor, text))
    causes = {d[1] for d in docs}
    for c in train_cases(corpus_root):
        if c.cause in causes:
            docs.append((f"corpus:{c.id}", c.cause, c.source, c.log[:CORPUS_DOC_CHARS]))
    return docs


class KnownFailures:
    def __init__(self, docs: list[tuple[str, str, str, str]], failures: list[Known] | None = None,
                 doc_tokens: list[list[str]] | None = None):
        """`failures` and `doc_tokens`, when given, are what the documents' error lines and BM25 tokens were
        found to be (retrieval_cache); otherwise they are read from the documents (tokens on first use)."""
        self.docs = docs
        if failures is None:
            failures = [Known(cause, where, doc_id, failure_of_text(line, frames))
                        for doc_id, cause, where, text in docs for line, frames in dict.fromkeys(error_lines(text))]
        self.failures = failures
        self._bm25: tuple[tuple[int, ...], object] | None = None
        self._tokens = doc_tokens
        self._ids: tuple[list[list[int]], dict[str, int]] | None = None

    def tokens(self) -> list[list[str]]:
        """Each document's BM25 tokens (computed once)."""
        if self._tokens is None:
            self._tokens = [retrieval_tokens(text) or ["<empty>"] for _, _, _, text in self.docs]
        return self._tokens

    def prepared(self) -> dict:
        """The documents, their failures and tokens as plain JSON data (retrieval_cache stores it)."""
        return {"docs": self.docs, "tokens": self.tokens(),
                "failures": [[k.cause, k.where, k.doc_id, k.failure.exc_type, k.failure.message,
                              sorted(k.failure.words), list(k.failure.frames), k.failure.says, k.failure.store]
                             for k in self.failures]}

    @classmethod
    def from_prepared(cls, data: dict) -> KnownFailures:
        """The inverse of prepared()."""
        failures = [Known(cause, where, doc_id, Failure(exc, msg, frozenset(words), tuple(frames), says, store))
                    for cause, where, doc_id, exc, msg, words, frames, says, store in data["failures"]]
        return cls([tuple(d) for d in data["docs"]], failures, data["tokens"])

    def structural(self, failures: list[Failure]) -> list[Match]:
        """Known failures of the same type and template as one of the log's (best per cause)."""
        best: dict[str, Match] = {}
        for f in failures:
            for k in self.failures:
                if k.doc_id in _EXCLUDED:
                    continue
                s = similarity(f, k.failure)
                if s >= STRUCTURAL_MIN and (k.cause not in best or s > best[k.cause].score):
                    best[k.cause] = Match(k.cause, k.where, k.doc_id, round(s, 3), k.failure.message)
        return sorted(best.values(), key=lambda m: (-m.score, m.cause))

    def _token_ids(self) -> tuple[list[list[int]], dict[str, int]]:
        """Each document's tokens as ids of one vocabulary over all documents (computed once). A word that only
        a left-out document has is in no indexed document, so it adds nothing to any score: an index over
        these ids scores exactly as one built from the kept documents' own words."""
        if self._ids is None:
            vocab: dict[str, int] = {"": 0}
            ids = [[vocab.setdefault(t, len(vocab)) for t in doc] for doc in self.tokens()]
            self._ids = (ids, vocab)
        return self._ids

    def _index(self) -> tuple[object, list[int]]:
        """BM25 over the documents not left out, and their positions in `docs`: a document left out is out of
        the index's statistics too, as a log nobody has seen. The last index is kept, keyed by the documents
        it holds (scoring a held-out case leaves out nothing the index has, so it is not rebuilt)."""
        kept = [i for i, d in enumerate(self.docs) if d[0] not in _EXCLUDED]
        key = tuple(kept)
        if self._bm25 is None or self._bm25[0] != key:
            import bm25s  # imported on first use: a log with signature evidence never needs it

            ids, vocab = self._token_ids()
            bm25 = bm25s.BM25(k1=BM25_K1, b=BM25_B)
            bm25.index(([ids[i] for i in kept], dict(vocab)), show_progress=False)
            self._bm25 = (key, bm25)
        return self._bm25[1], kept

    def similar(self, query: str) -> list[Match]:
        """Causes whose documents are most like the query, strongest first: each of the NEIGHBOURS best documents
        votes for its cause with its share of the best score; a cause is shown by its best document."""
        q = retrieval_tokens(query)
        if not q or not self.docs:
            return []
        import numpy as np

        bm25, kept = self._index()
        if not kept:
            return []
        scores = np.asarray(bm25.get_scores(q), dtype=float)
        votes: dict[str, float] = {}
        best: dict[str, int] = {}
        top = 0.0
        for j in map(int, np.argsort(-scores, kind="stable")[:NEIGHBOURS]):
            if scores[j] <= 0:
                break
            doc_id, cause = self.docs[kept[j]][:2]
            top = top or float(scores[j])
            weight = ENTRY_WEIGHT if doc_id.startswith("entry:") else 1.0
            votes[cause] = votes.get(cause, 0.0) + weight * (float(scores[j]) / top) ** SHARE_POWER
            best.setdefault(cause, kept[j])
        most = max(votes.values(), default=0.0)
        out = []
        for cause in sorted(votes, key=lambda c: (-votes[c], c))[:SIMILAR_TOP]:
            if votes[cause] < SIMILAR_MIN * most:
                break
            doc_id, _, where, text = self.docs[best[cause]]
            out.append(Match(cause, where, doc_id, round(votes[cause] / most, 3), _best_line(text, set(q))))
        return out


def _best_line(text: str, q: set[str]) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return max(lines, key=lambda ln: len(q & set(tokens(ln))), default="")[:300]


def known_failures(references_root: str | None = None) -> KnownFailures:
    return _known(references_root or str(paths.REFERENCES), _CORPUS_ROOT[0])


@lru_cache(maxsize=4)
def _known(references_root: str, corpus_root: str | None) -> KnownFailures:
    """The known failures, from the user's cache when their inputs have not changed since they were prepared."""
    from distdoctor.diagnose import retrieval_cache

    digest = retrieval_cache.key(references_root, corpus_root)
    data = retrieval_cache.load(digest)
    if data is not None:
        try:
            return KnownFailures.from_prepared(data)
        except (KeyError, TypeError, ValueError):
            pass  # a damaged entry: prepared again below and written over
    known = KnownFailures(documents(references_root, corpus_root))
    retrieval_cache.store(digest, known.prepared())
    return known
