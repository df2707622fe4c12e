"""Reading shell scripts without running them.

`drift.shell.evaluate` parses a script with tree-sitter's bash grammar and
walks it with an abstract environment: every variable keeps each value it
may have, with the file and line that gave it and the branch it sits under.
The result (`ScriptModel`) names the command the script launches and what
that command may receive; the live process then picks between the
possibilities.

- `evaluate`: the walk of the statements, branches, sources and launches;
- `words`: the values (`Alt`, `Binding`, `Field`) and how a word expands;
- `commands`: what programs are (housekeeping, wrappers, servers);
- `patterns`: text with holes, cheap to import, for the analysis that
  matches live values.

Nothing here knows about collectors, facts or the database.
"""
