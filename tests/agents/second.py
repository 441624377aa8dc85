"""Fake agent whose first guess is wrong but whose ranked list has the expected cause second (top-3 only)."""
import json

from _lookup import case_and_expected

case, expected = case_and_expected()
decoy = "fabric_fault" if expected != "fabric_fault" else "port_in_use"
print(json.dumps({"cause": decoy, "causes": [decoy, expected]}))
