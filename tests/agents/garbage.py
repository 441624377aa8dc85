"""Fake agent that prints garbage: no JSON object with a cause and no CAUSE line."""
import sys

sys.stdin.read()
sys.stdout.write("\x1b[31m!!! ]]{{ not an answer \u2603 \n{\"causa\": 1}\n<<>>\n")
