"""The patch engine: libcst codemods under patches/, applied safely to a repository."""
