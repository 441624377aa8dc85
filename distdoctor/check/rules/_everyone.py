"""Shared test of the "every rank does it" rules (DD301-DD303): a call in a distributed file that runs on
every rank (no rank guard, no main-process-first block, not in a function called only under a guard)."""

from __future__ import annotations

from distdoctor.check import api


def on_every_rank(model, site) -> bool:
    return api.is_distributed(model) and not api.guarded(site) and site.func.name != "<lambda>"


def report(model, out, rule, site, message: str) -> None:
    """Pending: dropped when every call of the enclosing function is rank-guarded."""
    func = site.func.key if site.func.name != "<module>" else None
    out.add_pending(model, site.node, rule, message, unless=set(), func=func)
