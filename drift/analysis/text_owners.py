"""Which story shows which hunk of a changed script text, so no hunk is shown twice.

A serve script with two edits in one window is two stories; its text diff is
evidence of the first, and each story shows the hunk of its own line
(`drift.analysis.investigate` asks `TextOwners` for a change's diff).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from drift.analysis.diff import Change
from drift.analysis.story import Side, Story, change_spots
from drift.analysis.structured import Hunk
from drift.analysis.values import ValueDiff, Values


class TextOwners:
    """Which story shows which hunk of a changed script text.

    A text change is evidence of one story (the first edit in that file);
    when the file holds several edits, each story shows the hunk of its own
    line, and the owner the hunks of no other story's: no hunk twice, none
    lost.
    """

    def __init__(self, stories: Sequence[Story]) -> None:
        self.text_of: dict[str, tuple[Change, Story]] = {}
        self.spots: dict[str, list[tuple[Story, Side, int]]] = {}
        for story in stories:
            for change in story.changes:
                if change.key == "content" and change.subject.startswith("script:"):
                    self.text_of[change.subject.removeprefix("script:")] = (change, story)
            for file, side, line in change_spots(story.root):
                self.spots.setdefault(file, []).append((story, side, line))

    def diff(self, story: Story, change: Change, values: Values) -> ValueDiff | None:
        """The diff shown with `change` in `story`, when it is not the change's whole diff."""
        if change.key == "content" and change.subject.startswith("script:"):
            at = self.spots.get(change.subject.removeprefix("script:"), [])
            own = [(side, line) for s, side, line in at if s is story]
            others = [(side, line) for s, side, line in at if s is not story]
            if not others:
                return None
            return values.diff(change, lambda h: _in_hunk(h, own) or not _in_hunk(h, others))
        if change is not story.root:
            return None
        for file in sorted({f for f, _, _ in change_spots(change)}):
            text = self.text_of.get(file)
            if text is not None and text[1] is not story:
                mine = [(side, line) for s, side, line in self.spots[file] if s is story]
                return values.diff(text[0], partial(_in_hunk, spots=mine))
        return None


def _in_hunk(hunk: Hunk, spots: Sequence[tuple[Side, int]]) -> bool:
    return any(hunk.touches(side, line) for side, line in spots)
