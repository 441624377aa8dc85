"""The hang doctor: snapshots of live ranks (py-spy, Flight Recorder) in, odd ranks, cause and location out.

    from distdoctor.hang import collect, analyse, merge
    snap = collect(root_pid=agent_pid)         # this host; HostSnapshot.to_json() for --collect
    verdict = analyse(merge([snap, other]))    # any number of hosts

Names load on first use, so collecting does not pay for the analysis's imports (libcst).
"""

from importlib import import_module

_WHERE = {"analyse": "align", "Verdict": "align", "collect": "live", "CollectError": "live",
          "HostSnapshot": "model", "RankSnapshot": "model", "merge": "model"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"distdoctor.hang.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'distdoctor.hang' has no attribute {name!r}")
