"""The retrieval index's prepared documents kept in the user's cache: the same answers from the cache as from the
files, a new key when an input changes, a damaged entry rebuilt, held-out files never in the key."""

import json
import os
import shutil

import pytest

from distdoctor import paths
from distdoctor.corpus import CORPUS, split_of
from distdoctor.diagnose import retrieval, retrieval_cache
from distdoctor.diagnose.retrieval import KnownFailures, documents

QUERY = "RuntimeError: Connection closed by peer [10.0.0.3]:41234 while waiting for the store"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    retrieval._known.cache_clear()
    yield tmp_path / "cache" / "distdoctor" / "retrieval"
    retrieval._known.cache_clear()


def test_prepared_documents_round_trip_to_the_same_answers():
    built = KnownFailures(documents(str(paths.REFERENCES), None))
    loaded = KnownFailures.from_prepared(json.loads(json.dumps(built.prepared())))
    assert loaded.docs == built.docs and loaded.failures == built.failures
    assert loaded.similar(QUERY) == built.similar(QUERY)
    assert loaded.structural([f.failure for f in built.failures[:5]]) == built.structural(
        [f.failure for f in built.failures[:5]])


def test_second_run_reads_the_cache_and_answers_alike(cache):
    first = retrieval.known_failures().similar(QUERY)
    entries = list(cache.glob("*.json"))
    assert len(entries) == 1
    retrieval._known.cache_clear()
    data = json.loads(entries[0].read_text())
    data["docs"][0][1] = "marked_from_cache"  # proves the next load comes from the file, not from the sources
    entries[0].write_text(json.dumps(data))
    known = retrieval.known_failures()
    assert known.docs[0][1] == "marked_from_cache"
    assert known.similar(QUERY) != [] and first != []


def test_a_damaged_entry_is_rebuilt_without_error(cache):
    retrieval.known_failures()
    (entry,) = cache.glob("*.json")
    entry.write_text('{"format": 1, "docs": [[1]]')  # cut short
    retrieval._known.cache_clear()
    assert retrieval.known_failures().similar(QUERY)
    assert json.loads(entry.read_text())["docs"]  # written again, whole


def test_an_edited_reference_file_gives_another_key(tmp_path):
    refs = tmp_path / "references"
    shutil.copytree(paths.REFERENCES, refs)
    before = retrieval_cache.key(str(refs), None)
    assert retrieval_cache.key(str(refs), None) == before
    md = sorted(refs.glob("*.md"))[0]
    md.write_text(md.read_text() + "\n")
    assert retrieval_cache.key(str(refs), None) != before


def test_only_train_files_of_the_corpus_are_in_the_key():
    names = [p.name for p in retrieval_cache._train_files(CORPUS)]
    stems = [n[:-len(".meta.yaml")] if n.endswith(".meta.yaml") else n[:-len(".log")] for n in names
             if n.endswith((".log", ".meta.yaml"))]
    assert stems and all(split_of(s) == "train" for s in stems)


def test_old_entries_beyond_the_newest_few_are_removed(cache):
    cache.mkdir(parents=True)
    for i in range(retrieval_cache.KEEP + 2):  # older entries, oldest first
        (cache / f"old{i}.json").write_text("{}")
        os.utime(cache / f"old{i}.json", ns=(10**18 + i, 10**18 + i))
    retrieval_cache.store("new", {"docs": [], "tokens": [], "failures": []})
    left = sorted(p.stem for p in cache.glob("*.json"))
    assert len(left) == retrieval_cache.KEEP and "new" in left and "old0" not in left
    assert retrieval_cache.load("new") == {"format": retrieval_cache.FORMAT, "docs": [], "tokens": [], "failures": []}
