"""The eval harness: cases (cases.py), responders (responders.py), scoring, reports, and the closed loop (e2e.py)."""
