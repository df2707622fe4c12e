"""Reading shell scripts without running them.

`drift.shell.evaluate` parses a script with tree-sitter's bash grammar and
walks it with an abstract environment: every variable keeps each value it
may have, with the file and line that gave it and the branch it sits under.
The result (`ScriptModel`) names the command the script launches and what
that command may receive; the live process then picks between the
possibilities. `drift.shell.patterns` holds the values themselves (text with
holes) and is cheap to import, for the analysis that matches live values.
Nothing here knows about collectors, facts or the database.
"""
