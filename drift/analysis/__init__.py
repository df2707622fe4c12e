"""Analysis: compare states, and say what changed, what did not, and where the evidence is thin."""
