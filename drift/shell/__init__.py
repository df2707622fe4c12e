"""Reading shell scripts without running them.

`drift.shell.evaluate.evaluate` parses a script with tree-sitter's bash
grammar and walks it with an abstract environment: every variable keeps each
value it may have, with the file and line that gave it and the branch it sits
under. The result (`ScriptModel`) names the command the script launches and
what that command may receive; the live process then picks between the
possibilities.

What the reader works with and gives back:

- `values`: what a word, a variable and a command line may hold (`Alt`,
  `Seg`, `Binding`, `Field`);
- `model`: the result (`ScriptModel`, `Launch`, `SourcedFile`);
- `state`: one path through the script, forked and merged at branches;
- `syntax`: the grammar (parsing, reading nodes, ``bash -n``);
- `patterns`: text with holes, cheap to import, for the analysis that
  matches live values;
- `commands`: what programs are (housekeeping, wrappers, servers).

The evaluator is one object made of rooms, a mixin each; `evaluate` puts
them together and its two tables send each kind of statement and of word to
its room:

- words: `words` (the literal forms, quotes, concatenation), `expansion`
  (``$X``, ``${X:-d}`` and kin, ``"$@"``), `substitution` (``$(...)`` with
  a known output), `fields` (word splitting, choices);
- statements: `walk` (the walk and the evaluator's state), `assignments`,
  `declarations` (``export``, ``declare``, ``local``, ``unset``),
  `conditions` (what a test decides), `flow` (``if``, ``case``, ``&&``,
  loops, functions), `builtins` (``source``, ``set``, ``read``, ``eval``,
  calls), `launches` (simple commands, launches, child shells), `wrappers`
  (``env K=V nohup srv`` runs ``srv``), `start` (a file read from the
  folder the script was started in, when that folder is not known).

To teach drift a new statement, add a method to the room it belongs to and
name it in `evaluate._Evaluator.STATEMENTS` (a new word form: `WORD_FORMS`).
Nothing here knows about collectors, facts or the database.
"""
