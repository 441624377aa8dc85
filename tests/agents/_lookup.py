"""Shared by the fake agents: read the case from stdin, find its expected cause in the case file named by argv[1].

The harness never gives an agent the answer; these fakes cheat on purpose (they read the case file) so a
test can put the score where it wants it and check that the harness reports it.
"""
import json
import sys


def case_and_expected() -> tuple[dict, str]:
    case = json.loads(sys.stdin.read())
    with open(sys.argv[1], encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                c = json.loads(line)
                if c["id"] == case["id"]:
                    return case, c["expected_cause"]
    raise SystemExit(f"case {case['id']} not in {sys.argv[1]}")
