"""Fake agent that is always wrong: names a real cause id that is not the expected one."""
import json

from _lookup import case_and_expected

case, expected = case_and_expected()
print(json.dumps({"cause": "fabric_fault" if expected != "fabric_fault" else "port_in_use"}))
