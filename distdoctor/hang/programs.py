"""The hang programs under evals/programs/ and what the hang doctor must say about each: odd ranks, cause,
and the location line (found by its text, so editing a program does not break its expectation)."""

from __future__ import annotations

from dataclasses import dataclass, field

from distdoctor import paths

PROGRAMS = paths.ROOT / "evals" / "programs"


@dataclass(frozen=True)
class HangCase:
    name: str  # evals/programs/<name>.py
    nproc: int
    odd_ranks: tuple[int, ...]
    cause: str
    location: str  # the text of the location line (stripped)
    flight_recorder: bool = False  # the program writes Flight Recorder traces on a stall
    env: dict = field(default_factory=dict)
    stdin_open: bool = False  # the ranks' stdin is an open pipe (a terminal nobody types in), see jobs.start
    in_init: bool = False  # the job hangs in its start-up (every rank in init_process_group), see jobs.wait_stuck

    @property
    def program(self):
        return PROGRAMS / f"{self.name}.py"

    @property
    def line(self) -> int:
        """The location's line number, from its text."""
        lines = [i for i, t in enumerate(self.program.read_text().splitlines(), 1) if t.strip() == self.location]
        if len(lines) != 1:
            raise ValueError(f"{self.program}: expected one line `{self.location}`, found {len(lines)}")
        return lines[0]


BUILT_ON = [  # the programs the doctor was built on
    HangCase("hang_rank0_eval", 2, (0,), "rank_conditional_collective", "if rank == 0:"),
    HangCase("hang_uneven_shards", 3, (0,), "dataloader_uneven", "for batch in batches:"),
    HangCase("hang_checkpoint_rank0", 2, (0,), "checkpoint_all_ranks", "if is_main_process():"),
    HangCase("hang_straggler_io", 2, (1,), "collective_timeout", 'with open(path, "rb") as f:'),
    HangCase("hang_logger_init", 2, (1,), "logger_init_all_ranks", "logger = RunLogger(run_dir)"),
    HangCase("hang_peer_exit", 2, (1,), "peer_died_first", "dist.all_reduce(total)"),
    HangCase("hang_fr_size_mismatch", 3, (0,), "collective_shape_mismatch", "dist.all_reduce(counts)",
             flight_recorder=True),
    HangCase("hang_breakpoint_rank0", 2, (0,), "debugger_on_one_rank", "breakpoint()", stdin_open=True),
    HangCase("hang_early_return", 2, (0,), "rank_conditional_collective", "if rank != 0:"),
    HangCase("hang_collective_order", 2, (0,), "rank_conditional_collective", "if rank == 0:"),
    HangCase("hang_loader_worker", 2, (1,), "collective_timeout", "time.sleep(3600)  # the read that never returns"),
    HangCase("hang_prompt_rank0", 2, (0,), "prompt_on_one_rank", 'answer = input(f"{path} exists. Overwrite? [y/N] ")',
             stdin_open=True),
    HangCase("hang_lock_barrier", 2, (1,), "download_race",
             "fcntl.flock(lock, fcntl.LOCK_EX)  # read the cache once rank 0 has filled it"),
    HangCase("hang_thread_lock", 2, (1,), "collective_timeout", "with metrics_lock:"),
    HangCase("hang_init_world_size", 2, (2,), "store_barrier_world_size",
             'dist.init_process_group("gloo", rank=rank, world_size=world)', in_init=True),
    HangCase("hang_init_address", 2, (), "rendezvous_unreachable",
             'dist.init_process_group("gloo", init_method=address, rank=rank, world_size=world)', in_init=True),
]

# Shapes the doctor was not built on (helper hangs2, 2026-11-27): the expected answers were written before the
# doctor first saw these programs; docs/hang-generalization.md keeps its first answers beside them.
GENERALIZATION = [
    HangCase("hang_except_skip", 3, (1,), "rank_conditional_collective", "except ValueError as exc:"),
    HangCase("hang_gather_object_slow", 2, (1,), "collective_timeout",
             "while total < self.size:  # serialise every record"),
    HangCase("hang_barrier_vs_allreduce", 3, (1,), "rank_conditional_collective", "if value is None:"),
    HangCase("hang_subprocess_stuck", 2, (1,), "collective_timeout", "subprocess.run(cmd, check=False)"),
    HangCase("hang_cpu_straggler", 2, (1,), "collective_timeout", "return sum(t * t for t in range(n))"),
    HangCase("hang_dead_producer", 2, (1,), "collective_timeout", "batch = batches.get()"),
    HangCase("hang_pipe_full", 2, (1,), "collective_timeout", "conn.send(payload)"),
    HangCase("hang_partial_new_group", 2, (0,), "rank_conditional_collective", "if rank == 0:"),
    HangCase("hang_loader_exhausted", 3, (1,), "dataloader_uneven", "while True:"),
    HangCase("hang_wait_marker_file", 2, (0,), "collective_timeout", "while not os.path.exists(marker):"),
]

# A second round (helper hangs2, 2026-11-27), written after the rules that the first round led to: its expected
# answers were committed before the changed doctor first saw it (docs/hang-generalization.md, round 2).
ROUND2 = [
    HangCase("hang_gather_unpicklable", 3, (1,), "rank_conditional_collective", "except Exception as exc:"),
    HangCase("hang_data_early_return", 3, (1,), "rank_conditional_collective", "if batch.numel() == 0:"),
    HangCase("hang_join_worker", 2, (1,), "collective_timeout", "worker.join()"),
    HangCase("hang_store_get", 2, (0,), "collective_timeout", 'path = store.get("best_checkpoint")'),
]
# A third round (helper hangs3, 2026-11-27): shapes from framework-like code (hooks, decorators, helpers, context
# managers, generators, partials), p2p, a time budget and two odd ranks of four. Expected answers committed before
# the doctor first saw them; docs/hang-generalization.md, round 3, keeps its first answers.
ROUND3 = [
    HangCase("hang_callback_rank0", 2, (0,), "rank_conditional_collective", "if self.is_global_zero:"),
    HangCase("hang_helper_rank_test", 2, (0,), "rank_conditional_collective", "if should_log(step):"),
    HangCase("hang_rank_zero_only", 2, (0,), "rank_conditional_collective", "@rank_zero_only"),
    HangCase("hang_time_budget", 2, (1,), "rank_conditional_collective",
             "if time.monotonic() - start > budget_s:"),
    HangCase("hang_recv_wrong_peer", 3, (2,), "rank_conditional_collective", "for dst in range(1, world - 1):"),
    HangCase("hang_two_slow_readers", 4, (1, 3), "collective_timeout", "chunk = os.read(fd, 1 << 16)"),
    HangCase("hang_partial_step", 3, (1,), "rank_conditional_collective", "if sync:"),
    HangCase("hang_main_first_ctx", 3, (0,), "rank_conditional_collective", "with main_process_first(rank):"),
    HangCase("hang_generator_break", 3, (0,), "dataloader_uneven", "if step >= max_steps:"),
]
# A fourth round (helper hangs4, 2026-12-02): loaders, step wrappers, clean-up clauses, DDP accumulation, node-local
# files, per-rank convergence tests, an interactive console and a lock left by a dead thread. Expected answers
# committed before the doctor first saw these programs; docs/hang-generalization.md, round 4, keeps its first answers.
ROUND4 = [
    HangCase("hang_loader_drop_last", 3, (0,), "dataloader_uneven", "for (x,) in loader:"),
    HangCase("hang_step_wrapper_swallow", 3, (1,), "rank_conditional_collective", "except Exception:"),
    HangCase("hang_finally_barrier", 3, (1,), "rank_conditional_collective", "finally:"),
    HangCase("hang_no_sync_accum", 2, (0,), "dataloader_uneven", "for i, x in enumerate(micro_batches):"),
    HangCase("hang_resume_broadcast_object", 3, (2,), "rank_conditional_collective", "if os.path.exists(path):"),
    HangCase("hang_local_convergence", 3, (2,), "rank_conditional_collective", "converged = abs(new - value) < TOL"),
    HangCase("hang_console_on_nan", 2, (0,), "debugger_on_one_rank",
             'code.interact(banner=f"step {step}: loss {loss}; inspect and Ctrl-D to go on", local=locals())',
             stdin_open=True),
    HangCase("hang_dead_thread_lock", 2, (1,), "collective_timeout", "stats_lock.acquire()"),
]
# Round-3 programs the doctor still gets wrong after its rules (docs/hang-generalization.md): kept out of CASES so
# the closed loop stays a regression check; their expected answers stay as first written.
OPEN = [c for c in ROUND3 if c.name in ("hang_rank_zero_only", "hang_time_budget", "hang_recv_wrong_peer")]
CASES = BUILT_ON + GENERALIZATION + ROUND2 + [c for c in ROUND3 if c not in OPEN] + ROUND4
ALL = BUILT_ON + GENERALIZATION + ROUND2 + ROUND3 + ROUND4  # every hang program, right or still open
BY_NAME = {c.name: c for c in CASES}
