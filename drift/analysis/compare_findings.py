"""A host's odd facts as findings: grouped (an export line, the variable it gives the live
process and the script text it changed are one), titled in words, scored and ranked.

The score weighs the kind of fact as `drift.analysis.rank` does, whether a running
process has it, and whether it changed since the host's own last stable window.
"""

from __future__ import annotations

from drift.analysis.comparison import Finding, OddFact, host_names
from drift.analysis.kinds import category_rank
from drift.analysis.rank import WEIGHTS


def ranked_findings(role: str, odd: dict[str, list[OddFact]]) -> list[Finding]:
    """Each odd host's differences as findings (an export and the live variable it gives
    are one), best first."""
    scored: list[tuple[float, str, list[str], str, list[OddFact]]] = []
    for host, facts in odd.items():
        for title, group in _stories(host, facts):
            score, reasons = _score(host, group)
            scored.append((score, title, reasons, host, group))
    scored.sort(key=lambda s: (-s[0], category_rank(s[4][0].kind), s[3], s[4][0].subject))
    return [
        Finding(i, round(score, 3), host, role, title, reasons, group)
        for i, (score, title, reasons, host, group) in enumerate(scored, 1)
    ]


def _stories(host: str, facts: list[OddFact]) -> list[tuple[str, list[OddFact]]]:
    """The odd facts of one host, grouped: a variable's script line, its value in the live
    process and the script's text are one story, rooted at the line."""
    by_variable: dict[str, list[OddFact]] = {}
    rest: list[OddFact] = []
    for fact in sorted(facts, key=lambda f: (category_rank(f.kind), f.subject, f.key)):
        name = _variable(fact.key)
        if name is not None:
            by_variable.setdefault(name, []).append(fact)
        else:
            rest.append(fact)
    stories = [(_title(host, group), group) for group in by_variable.values()]
    scripts = {f.subject for group in by_variable.values() for f in group}
    for fact in rest:
        owner = next(
            (g for _t, g in stories if fact.subject in scripts and g[0].subject == fact.subject),
            None,
        )
        if owner is not None and fact.kind == "script content":
            owner.append(fact)  # the script's text differs because of that line
            continue
        stories.append((_title(host, [fact]), [fact]))
    return stories


def _variable(key: str) -> str | None:
    for prefix in ("export:", "env:", "environment:"):
        if key.startswith(prefix):
            return key[len(prefix) :]
    return None


def _title(host: str, facts: list[OddFact]) -> str:
    root = facts[0]
    others = host_names(root.majority.hosts)
    name = _variable(root.key)
    spot = f" ({root.where})" if root.where else ""
    if name is not None and root.key.startswith("export:"):
        if root.value is None:
            return f"{host} does not export {name}{spot}; {others} set it to {root.majority.value}"
        tail = "do not set it" if root.majority.value is None else f"set {root.majority.value}"
        return f"{host} exports {name}={root.value}{spot}; {others} {tail}"
    if name is not None:
        service = root.subject.partition(":")[2]
        if root.value is None:
            theirs = f"{name}={root.majority.value}"
            return f"{host}'s {service} runs without {name}; {others} have {theirs}"
        tail = "run without it" if root.majority.value is None else f"have {root.majority.value}"
        return f"{host}'s {service} runs with {name}={root.value}{spot}; {others} {tail}"
    if root.value is None:
        return f"{host} has no {root.subject} {root.key}; {others} have {root.majority.value}"
    if root.majority.value is None:
        return f"{host} has {root.subject} {root.key} = {root.value}; {others} do not"
    return f"{host}: {root.subject} {root.key} = {root.value}; {others}: {root.majority.value}"


def _score(host: str, facts: list[OddFact]) -> tuple[float, list[str]]:
    """How likely this difference is the trouble: what kind of fact, whether a running
    process has it, whether it changed since the host's last stable window."""
    count = facts[0].among
    kinds = [f.kind for f in facts]
    kind_value = max(WEIGHTS.kind_values.get(k, WEIGHTS.other_kind) for k in kinds)
    live = any(f.subject.startswith("service:") for f in facts)
    reasons = [
        f"{host} alone of {count} hosts"
        if len(facts[0].majority.hosts) == count - 1
        else f"{host} and {count - 1 - len(facts[0].majority.hosts)} other host(s) differ "
        f"from the {len(facts[0].majority.hosts)} that agree"
    ]
    reasons.append(
        "in a running process" if live else "not seen in a running process (on disk or in a script)"
    )
    reasons.append(f"kind: {kinds[0]}")
    changed = [f.changed_since_stable for f in facts if f.changed_since_stable is not None]
    if any(changed):
        since_value = 1.0
        reasons.append(f"changed on {host} since its last stable window")
    elif changed:
        since_value = 0.0
        reasons.append(f"as it was on {host} at its last stable window")
    else:
        since_value = 0.5
        reasons.append(f"{host} has no stable window to tell whether it changed since")
    score = 0.45 * kind_value + 0.3 * (1.0 if live else 0.5) + 0.25 * since_value
    return score, reasons
