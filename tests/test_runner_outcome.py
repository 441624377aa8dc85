"""What counts as a finished run: exit 0, or every line printed and only gloo's teardown abort after it."""

from distdoctor.runner import TEARDOWN_ABORT, RunResult, succeeded

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
