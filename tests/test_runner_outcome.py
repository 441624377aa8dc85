"""What counts as a finished run: exit 0, or every line printed and only gloo's teardown abort after it."""

from distdoctor.runner import TEARDOWN_ABORT, RunResult, completed, finished_ranks, succeeded

DONE = "DISTDOCTOR_OK rank=0 checksum=1.5\nDISTDOCTOR_OK rank=1 checksum=1.5\n"


def result(code, output, timed_out=False):
    return RunResult(["torchrun"], code, output, timed_out)


def test_exit_zero_succeeds():
    assert succeeded(result(0, ""))


def test_teardown_abort_after_the_work_is_allowed():
    assert succeeded(result(1, DONE + TEARDOWN_ABORT + "\n"))


def test_teardown_abort_before_any_rank_finished_fails():
    assert not succeeded(result(1, TEARDOWN_ABORT + "\n"))


def test_other_failures_and_timeouts_fail():
    assert not succeeded(result(1, DONE + "RuntimeError: boom\n"))
    assert not succeeded(result(None, DONE + TEARDOWN_ABORT, timed_out=True))


def test_completed_needs_the_end_line_of_every_rank():
    ends = "CHECKSUM rank=1 -1.0CHECKSUM rank=0 1.0\n"  # two ranks' prints run together on one line
    assert completed(result(0, ""), r"CHECKSUM rank=\d", 2)
    assert completed(result(-6, ends + TEARDOWN_ABORT), r"CHECKSUM rank=\d", 2)
    assert not completed(result(-6, "CHECKSUM rank=1 -1.0\n" + TEARDOWN_ABORT), r"CHECKSUM rank=\d", 2)
    assert not completed(result(1, ends + "RuntimeError: boom\n"), r"CHECKSUM rank=\d", 2)


def test_a_checksum_followed_by_another_ranks_text_is_read_as_its_float():
    # an unbuffered print writes the text, then its newline: another rank's line may come in between
    out = "DISTDOCTOR_OK rank=1 checksum=-0.0515406step 4 loss 0.1234\nDISTDOCTOR_OK rank=0 checksum=-0.0515406\n"
    assert finished_ranks(out) == {0: "-0.0515406", 1: "-0.0515406"}
    assert finished_ranks("DISTDOCTOR_OK rank=0 checksum=1e-05DISTDOCTOR_OK rank=1 checksum=nan\n") == {0: "1e-05", 1: "nan"}
