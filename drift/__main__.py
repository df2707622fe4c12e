"""`python -m drift` is the same as the drift command."""

from drift.cli import main

main()
