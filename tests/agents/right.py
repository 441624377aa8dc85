"""Fake agent that is always right: prints {"cause": <expected>} (looked up in the case file argv[1])."""
import json

from _lookup import case_and_expected

case, expected = case_and_expected()
print("some reasoning first {not json}")
print(json.dumps({"cause": expected, "patch": None}))
