"""Fake agent that crashes with a traceback and a non-zero status."""
import sys

sys.stdin.read()
raise RuntimeError("fake agent crashed on purpose")
