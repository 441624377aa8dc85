"""Fake agent that is always right and answers with a last line `CAUSE: <id>` instead of JSON."""
from _lookup import case_and_expected

case, expected = case_and_expected()
print("I read SKILL.md and the log.")
print(f"CAUSE: {expected}")
