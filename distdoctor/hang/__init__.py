"""The hang doctor: snapshots of live ranks (py-spy, Flight Recorder) in, odd ranks, cause and location out.

    from distdoctor.hang import collect, analyse, merge
    snap = collect(root_pid=agent_pid)         # this host; HostSnapshot.to_json() for --collect
    verdict = analyse(merge([snap, other]))    # any number of hosts
"""

from distdoctor.hang.analyse import Verdict, analyse
from distdoctor.hang.collect import CollectError, collect
from distdoctor.hang.model import HostSnapshot, RankSnapshot, merge

__all__ = ["CollectError", "HostSnapshot", "RankSnapshot", "Verdict", "analyse", "collect", "merge"]
