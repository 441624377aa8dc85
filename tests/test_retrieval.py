"""The retrieval fallback: word pairs, votes over the best documents, documents left out of the statistics, the
query the engine builds, and the cross-validation harness on a tiny corpus folder."""

import json

import yaml

from distdoctor.corpus import split_of
from distdoctor.diagnose import retrieval
from distdoctor.diagnose.engine import retrieval_query
from distdoctor.diagnose.retrieval import KnownFailures, excluding, retrieval_tokens
from distdoctor.evals import retrieval_cv

RESET = "RuntimeError: Connection reset by peer while waiting for the store"


def test_tokens_pair_neighbouring_words():
    toks = retrieval_tokens(RESET)
    assert {"connection", "reset", "connection_reset", "reset_peer"} <= set(toks)
    assert not any(t.startswith("runtimeerror_") and t.endswith("traceback") for t in toks)


def _doc(doc_id: str, cause: str, text: str) -> tuple[str, str, str, str]:
    return (doc_id, cause, f"https://example.invalid/{doc_id}", text)


def test_several_neighbours_of_one_cause_outvote_the_single_best_document():
    docs = [_doc("corpus:a", "cause_a", "watchdog caught collective operation timeout allreduce"),
            _doc("corpus:b1", "cause_b", "watchdog caught collective operation timeout, rank 1"),
            _doc("corpus:b2", "cause_b", "watchdog caught collective operation timeout, rank 2"),
            _doc("corpus:b3", "cause_b", "watchdog caught collective operation timeout, rank 3"),
            _doc("corpus:c", "cause_c", "cuda out of memory tried to allocate"),
            _doc("corpus:d", "cause_d", "store client timeout"),
            _doc("corpus:e", "cause_e", "segmentation fault")]
    known = KnownFailures(docs)
    query = "watchdog caught collective operation timeout on the allreduce"
    bm25, kept = known._index()
    scores = bm25.get_scores(retrieval_tokens(query))
    assert docs[kept[int(scores.argmax())]][1] == "cause_a"  # the single best document is cause_a's
    got = known.similar(query)
    # three neighbours at 0.6 of the best score outvote it; a faint one (one shared word) is not similar enough
    assert [m.cause for m in got] == ["cause_b", "cause_a"] and got[0].score == 1.0 and 0.5 < got[1].score < 1
    assert got[0].doc_id == "corpus:b1"


def test_a_document_left_out_is_out_of_the_statistics():
    docs = [_doc("corpus:a", "cause_a", "store timeout rendezvous socket"),
            _doc("corpus:b", "cause_b", "socket timeout gloo connect"),
            _doc("corpus:c", "cause_c", "rendezvous socket socket socket closed")]
    query = "rendezvous socket timeout"
    with excluding({"corpus:c"}):
        left_out = KnownFailures(docs).similar(query)
    without = KnownFailures(docs[:2]).similar(query)
    assert left_out == without and "cause_c" not in [m.cause for m in left_out]
    # the index is rebuilt once the document is back
    back = KnownFailures(docs)
    with excluding({"corpus:c"}):
        back.similar(query)
    assert "cause_c" in [m.cause for m in back.similar(query)]


def test_the_index_over_shared_token_ids_scores_as_one_built_from_the_kept_words():
    """The index is fed token ids of one vocabulary over all documents: with a document left out (and a query
    word only that document has) its scores are bm25s's own over the kept documents' words, to the bit; leaving
    out an id the index does not hold (a held-out case) does not rebuild it."""
    import bm25s
    import numpy as np

    docs = [_doc("corpus:a", "cause_a", "store timeout rendezvous socket"),
            _doc("corpus:b", "cause_b", "socket timeout gloo connect connect"),
            _doc("corpus:c", "cause_c", "rendezvous socket socket socket closed")]
    q = retrieval_tokens("rendezvous socket closed timeout connect")
    known = KnownFailures(docs)
    with excluding({"corpus:c"}):
        bm25, kept = known._index()
        got = bm25.get_scores(q)
    ref = bm25s.BM25(k1=retrieval.BM25_K1, b=retrieval.BM25_B)
    ref.index([retrieval_tokens(d[3]) for d in docs[:2]], show_progress=False)
    assert kept == [0, 1] and np.array_equal(got, ref.get_scores(q))
    whole = known._index()[0]
    with excluding({"corpus:heldout_case"}):
        assert known._index()[0] is whole


def test_query_holds_the_failure_and_the_description():
    log = "[rank1]: Traceback (most recent call last):\n[rank1]: " + RESET + "\n"
    q = retrieval_query(log, context="two nodes, torchrun --nnodes 2")
    assert "Connection reset by peer" in q and "torchrun --nnodes 2" in q
    assert retrieval_query("", context="only words") == "only words"


UNIQUE = ("Traceback (most recent call last):\n"
          '  File "train.py", line 9, in <module>\n'
          "RuntimeError: frobnicator quorum lost while flushing the zorbulator ring\n")


def _case(root, case_id: str, cause: str, log: str) -> None:
    (root / f"{case_id}.log").write_text(log)
    (root / f"{case_id}.meta.yaml").write_text(yaml.safe_dump(
        {"source": f"https://example.invalid/{case_id}", "cause": cause, "confidence": "confirmed",
         "split": split_of(case_id)}))


def _ids(split: str, fold: int | None, n: int, folds: int = 2, skip: tuple = ()) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        cid = f"cv-{i}"
        if cid not in skip and split_of(cid) == split and (fold is None or retrieval_cv.fold_of(cid, folds) == fold):
            out.append(cid)
        i += 1
    return out


def test_cross_validation_leaves_each_fold_out(tmp_path, capsys):
    # two cases with the same unheard-of failure in different folds find each other; a third with another
    # unheard-of failure, alone in the corpus, finds nothing (its own log is never in its fold's index)
    (twin0,), (twin1,) = _ids("train", 0, 1), _ids("train", 1, 1)
    (alone,) = _ids("train", None, 1, skip=(twin0, twin1))
    held = _ids("heldout", None, 2)
    _case(tmp_path, twin0, "port_in_use", UNIQUE)
    _case(tmp_path, twin1, "port_in_use", UNIQUE.replace("ring", "ring 7"))
    _case(tmp_path, alone, "shm_too_small", UNIQUE.replace("frobnicator quorum", "quuxinator spindle"))
    for cid in held:  # held-out cases are never read: not in the index, not in the figures
        _case(tmp_path, cid, "shm_too_small", UNIQUE.replace("frobnicator quorum", "quuxinator spindle"))
    try:
        assert retrieval_cv.main(["--corpus", str(tmp_path), "--folds", "2", "--json"]) == 0
    finally:
        retrieval.use_corpus(None)
    res = json.loads(capsys.readouterr().out)
    assert res["retrieval"] == {"n": 3, "top1": 2, "top3": 2}
    assert res["diagnosis"]["all"]["n"] == 3 and res["diagnosis"]["all"]["top1"] == 2


def test_cross_validation_refuses_bad_input(tmp_path, capsys):
    assert retrieval_cv.main(["--corpus", str(tmp_path / "nope")]) == 2
    assert retrieval_cv.main(["--corpus", str(tmp_path), "--folds", "1"]) == 2
    assert retrieval_cv.main(["--corpus", str(tmp_path)]) == 2  # no train case
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("retrieval_cv: --") for line in err)


def _group_ids(group: str, n: int) -> list[str]:
    """n train ids of one source repository (`<group>-<thread number>`)."""
    out, i = [], 1
    while len(out) < n:
        if split_of(f"{group}-{i}") == "train":
            out.append(f"{group}-{i}")
        i += 1
    return out


def test_grouped_folds_leave_a_whole_repository_out(tmp_path, capsys):
    # twins from one repository never see each other; with a third copy from another repository, all find it
    assert retrieval_cv.group_of("huggingface-accelerate-1234") == "huggingface-accelerate"
    same = _group_ids("projecta", 2)
    (other,) = _group_ids("projectb", 1)
    alone, mixed = tmp_path / "alone", tmp_path / "mixed"
    for root in (alone, mixed):
        root.mkdir()
        for cid in same:
            _case(root, cid, "port_in_use", UNIQUE)
    _case(mixed, other, "port_in_use", UNIQUE.replace("ring", "ring 7"))
    folds = retrieval_cv.folds_of(retrieval_cv.train_cases(str(mixed)), 0)
    assert sorted([c.id for c in f] for f in folds) == sorted([same, [other]])
    got = []
    try:
        for root in (alone, mixed):
            assert retrieval_cv.main(["--corpus", str(root), "--grouped", "--json"]) == 0
            got.append(json.loads(capsys.readouterr().out))
    finally:
        retrieval.use_corpus(None)
    assert got[0]["folds"] == "repository" and got[0]["retrieval"] == {"n": 2, "top1": 0, "top3": 0}
    assert got[1]["retrieval"] == {"n": 3, "top1": 3, "top3": 3}


def test_a_description_naming_only_the_symptom_lets_the_log_decide(tmp_path):
    # beside a log, "it hangs" says what any cause looks like: the log's neighbour (a known port_in_use log)
    # outranks it, while the symptom stays a candidate; with no log, a description naming a cause too is an account
    # (as a short log of prose is): its symptom counts half beside the cause it names
    from distdoctor.diagnose import diagnose_text
    from distdoctor.diagnose.engine import KEYWORD_WEIGHT

    (known,) = _group_ids("projectc", 1)
    _case(tmp_path, known, "port_in_use", UNIQUE)
    retrieval.use_corpus(tmp_path)
    try:
        r = diagnose_text(UNIQUE.replace("RuntimeError", "ValueError"), context="training hangs at the first step")
        both = diagnose_text("", context="training hangs when every rank writes to tensorboard")
    finally:
        retrieval.use_corpus(None)
    ids = [c["id"] for c in r["causes"]]
    assert ids[:2] == ["port_in_use", "collective_timeout"] and r["causes"][0]["level"] == "similar"
    assert r["causes"][1]["score"] == KEYWORD_WEIGHT / 2
    scores = {c["id"]: c["score"] for c in both["causes"]}
    assert scores["collective_timeout"] == KEYWORD_WEIGHT / 2 and scores["logger_init_all_ranks"] >= KEYWORD_WEIGHT
    # with no log at all the words are all there is: the symptom keeps its full weight
    alone = diagnose_text("", context="training hangs at the first step")
    assert {c["id"]: c["score"] for c in alone["causes"]}["collective_timeout"] == KEYWORD_WEIGHT


def _quote(cause: str) -> str:
    """The first quoted error text of a knowledge-base entry (real text, sourced in references/)."""
    from distdoctor import paths
    from distdoctor.knowledge import load_entries

    return next(e.quotes[0].text for e in load_entries(paths.REFERENCES) if e.cause == cause)


def test_signatures_left_out_are_not_matched_until_the_block_ends():
    from distdoctor.diagnose.matcher import matcher_for, without_signatures

    line = _quote("shm_too_small").splitlines()[0]
    hits = {(s.cause, s.index) for s in matcher_for().match_line(line)}
    assert hits and all(cause == "shm_too_small" for cause, _ in hits)
    with without_signatures(hits):
        assert matcher_for().match_line(line) == []
    assert {(s.cause, s.index) for s in matcher_for().match_line(line)} == hits


def test_drop_own_signatures_leaves_out_what_only_the_fold_matches(tmp_path, capsys):
    # two repositories share a port_in_use log: its signatures stay for both folds; a third repository's
    # shm_too_small log is the only one its signatures match, so its fold goes without them (the entry's quoted
    # text still gives the same failure's structure: the answer stands on that)
    ids = [_group_ids(g, 1)[0] for g in ("projectd", "projecte", "projectf")]
    _case(tmp_path, ids[0], "port_in_use", _quote("port_in_use"))
    _case(tmp_path, ids[1], "port_in_use", _quote("port_in_use"))
    _case(tmp_path, ids[2], "shm_too_small", _quote("shm_too_small"))
    matched = retrieval_cv.signature_cases(retrieval_cv.train_cases(str(tmp_path)))
    own = {k for k, where in matched.items() if where == {ids[2]}}
    assert own and {cause for cause, _ in own} == {"shm_too_small"}
    assert any(where == set(ids[:2]) for (cause, _), where in matched.items() if cause == "port_in_use")
    try:
        assert retrieval_cv.main(["--corpus", str(tmp_path), "--grouped", "--json", "--drop-own-signatures"]) == 0
    finally:
        retrieval.use_corpus(None)
    assert json.loads(capsys.readouterr().out)["diagnosis"]["all"] == {"n": 3, "top1": 3, "top3": 3}
