"""Fake agent that never answers (the harness must time it out and kill it)."""
import sys
import time

sys.stdin.read()
time.sleep(600)
