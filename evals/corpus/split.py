"""The frozen held-out rule of the real-log corpus (evals/corpus/README.md): it depends on the case id alone."""

import hashlib


def split_of(case_id: str) -> str:
    """`heldout` for about 30% of ids (sha256 of the id mod 10 < 3), else `train`."""
    return "heldout" if int(hashlib.sha256(case_id.encode()).hexdigest(), 16) % 10 < 3 else "train"
