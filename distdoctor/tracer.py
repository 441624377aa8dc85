"""Hang tracer for training scripts: rank-aware checkpoints on every rank, and a watchdog that dumps all
Python stacks of its rank (faulthandler) when no checkpoint came for N seconds.

    import distdoctor.tracer as T
    T.watchdog(120)              # dump stacks if this rank makes no progress for 120 s
    T.checkpoint("model built")  # [10:23:45.123][+2.456s][R0/2][LR0][PID:12345] CHECKPOINT 1: model built

Reads RANK, LOCAL_RANK, WORLD_SIZE from the environment (torchrun, or srun with them mapped). Output goes
to stderr, unbuffered, so every rank's last checkpoint survives a kill. A SIGUSR1 handler is registered
too, so `kill -USR1 <pid>` (or scripts/dump_stacks.py) prints the stacks of a running rank on demand.

Flight Recorder (torch records gloo and NCCL collectives when TORCH_FR_BUFFER_SIZE is set before the process
group is made): `watchdog(120, flight_recorder=True)` also writes this rank's trace on a stall, and
`dump_flight_recorder()` writes it now, to `$TORCH_FR_DUMP_TEMP_FILE<rank>` (the file and pickle format of
NCCL's TORCH_NCCL_DUMP_ON_TIMEOUT; default /tmp/nccl_trace_rank_<rank>), read by `scripts/hang.py --fr`.
`dump_flight_recorder_on_signal()` (opt-in) makes `kill -USR2 <pid>` write it while the rank waits in a
collective.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from datetime import datetime
from typing import TextIO

_START = time.monotonic()
_lock = threading.Lock()
_count = 0
_watchdog_seconds: float | None = None
_repeat = False
_stream: TextIO = sys.stderr
_sigusr1_registered = False
_flight_recorder = False
FR_DEFAULT_PREFIX = "/tmp/nccl_trace_rank_"  # NCCL's default for TORCH_FR_DUMP_TEMP_FILE


def _env_int(name: str) -> str:
    value = os.environ.get(name)
    return value if value not in (None, "") else "?"


def prefix() -> str:
    """`[HH:MM:SS.mmm][+elapsed][R<rank>/<world>][LR<local rank>][PID:<pid>]`."""
    now = datetime.now().strftime("%H:%M:%S.%f")[:-3]
    elapsed = time.monotonic() - _START
    return (f"[{now}][+{elapsed:.3f}s][R{_env_int('RANK')}/{_env_int('WORLD_SIZE')}]"
            f"[LR{_env_int('LOCAL_RANK')}][PID:{os.getpid()}]")


def _emit(line: str) -> None:
    """One write per line (text and newline together), so lines of ranks sharing a terminal do not interleave."""
    _stream.write(line + "\n")
    _stream.flush()


def log(message: str) -> None:
    """Print one rank-prefixed line (not numbered)."""
    _emit(f"{prefix()} {message}")


def checkpoint(label: str) -> int:
    """Number and print a checkpoint on this rank, and re-arm the watchdog. Returns the checkpoint number."""
    global _count, _last_time, _last_label
    with _lock:
        _count += 1
        k = _count
        _last_time, _last_label = time.monotonic(), f"CHECKPOINT {k}: {label}"
        _fired.clear()
    _emit(f"{prefix()} CHECKPOINT {k}: {label}")
    if _watchdog_seconds is not None:
        _arm_backstop()
    return k


_last_time = time.monotonic()
_last_label = "start of the program"
_fired = threading.Event()
_thread: threading.Thread | None = None
BACKSTOP_EXTRA = 10.0  # seconds after the thread's deadline at which the GIL-free faulthandler timer fires


def _arm_backstop() -> None:
    """faulthandler's C timer needs no GIL: it fires even if the thread below cannot run."""
    faulthandler.cancel_dump_traceback_later()
    faulthandler.dump_traceback_later(_watchdog_seconds + BACKSTOP_EXTRA, repeat=False, file=_stream, exit=False)


def dump_stacks(reason: str) -> None:
    """Print a rank-prefixed header, then all Python threads' stacks of this process."""
    _emit(f"{prefix()} {reason}; stacks of all threads of this rank follow")
    faulthandler.dump_traceback(file=_stream, all_threads=True)
    _emit(f"{prefix()} end of stacks")


def _watch() -> None:
    while True:
        seconds = _watchdog_seconds
        if seconds is None:
            return
        with _lock:
            idle = time.monotonic() - _last_time
            label = _last_label
            due = idle >= seconds and not _fired.is_set()
            if due:
                _fired.set()
        if due:
            faulthandler.cancel_dump_traceback_later()
            dump_stacks(f"WATCHDOG: no checkpoint for {idle:.1f}s (last: {label})")
            if _flight_recorder:
                _report_fr_dump()
            if _repeat:
                with _lock:
                    globals()["_last_time"] = time.monotonic()
                    _fired.clear()
        time.sleep(min(0.2, seconds / 4))


def watchdog(seconds: float, repeat: bool = False, stream: TextIO | None = None,
             flight_recorder: bool = False) -> None:
    """Arm a watchdog: if no checkpoint() comes for `seconds`, dump all Python threads' stacks of this rank.

    A daemon thread does the dump with a rank-prefixed header (collectives release the GIL while they
    wait, so it runs during a hang); a faulthandler timer BACKSTOP_EXTRA seconds later covers a main
    thread that holds the GIL. `repeat=True` dumps again every `seconds` while stuck; call again to change
    the period; `stop_watchdog()` ends it. `flight_recorder=True` also writes the Flight Recorder trace.
    """
    global _watchdog_seconds, _repeat, _stream, _thread, _last_time, _flight_recorder
    if seconds <= 0:
        raise ValueError(f"watchdog seconds must be positive, got {seconds}")
    _watchdog_seconds, _repeat, _flight_recorder = float(seconds), repeat, flight_recorder
    if stream is not None:
        _stream = stream
    with _lock:
        _last_time = time.monotonic()
        _fired.clear()
    log(f"WATCHDOG armed: stacks dumped after {seconds:g}s without a checkpoint")
    register_sigusr1()
    _arm_backstop()
    if _thread is None or not _thread.is_alive():
        _thread = threading.Thread(target=_watch, name="distdoctor-watchdog", daemon=True)
        _thread.start()


def stop_watchdog() -> None:
    global _watchdog_seconds
    _watchdog_seconds = None
    faulthandler.cancel_dump_traceback_later()


def register_sigusr1() -> bool:
    """Let `kill -USR1 <pid>` dump this rank's stacks (what scripts/dump_stacks.py falls back to)."""
    global _sigusr1_registered
    if _sigusr1_registered or not hasattr(signal, "SIGUSR1"):
        return _sigusr1_registered
    try:
        faulthandler.register(signal.SIGUSR1, file=_stream, all_threads=True, chain=False)
    except (ValueError, RuntimeError):  # not the main thread / unsupported
        return False
    _sigusr1_registered = True
    return True


def flight_recorder_path(rank: str | None = None) -> str:
    """Where this rank's Flight Recorder trace goes: `$TORCH_FR_DUMP_TEMP_FILE<rank>`."""
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or FR_DEFAULT_PREFIX
    return f"{prefix}{rank if rank is not None else _env_int('RANK')}"


def dump_flight_recorder(path: str | None = None) -> str | None:
    """Write this rank's Flight Recorder trace (torch's pickle) atomically; the path, or None when torch
    records nothing (TORCH_FR_BUFFER_SIZE unset or no process group)."""
    try:
        from torch._C._distributed_c10d import _dump_fr_trace
        data = _dump_fr_trace()
    except (ImportError, RuntimeError, AttributeError):
        return None
    if not data:
        return None
    path = path or flight_recorder_path()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return path


def _report_fr_dump() -> None:
    path = dump_flight_recorder()
    log(f"FLIGHT RECORDER: {'trace written to ' + path if path else 'nothing recorded (set TORCH_FR_BUFFER_SIZE)'}")


def dump_flight_recorder_on_signal(signum: int = getattr(signal, "SIGUSR2", 12)) -> bool:
    """Opt-in: `kill -USR2 <pid>` writes the Flight Recorder trace, also while the main thread waits in a
    collective (the signal's C handler writes to a wakeup pipe that a daemon thread reads). Call from the
    main thread; replaces any signal.set_wakeup_fd of the program. Returns False where it cannot."""
    try:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        signal.signal(signum, lambda *_: None)
        signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    except (ValueError, OSError, AttributeError):
        return False

    def wait() -> None:
        while True:
            for byte in os.read(read_fd, 64):
                if byte == signum:
                    _report_fr_dump()

    threading.Thread(target=wait, name="distdoctor-fr-signal", daemon=True).start()
    log(f"FLIGHT RECORDER: `kill -{signal.Signals(signum).name[3:]} {os.getpid()}` writes {flight_recorder_path()}")
    return True
