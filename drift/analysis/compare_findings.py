"""A host's odd facts as findings: grouped (an export line, the variable it gives the live
process and the script text it changed are one), titled in words, scored and ranked.

A leaf of an [[endpoints]] document that reports the knob a live variable or flag of its
service sets (`drift.analysis.knobs`) joins that difference's finding; a leaf two findings
could claim equally stays one of its own. Either way the running server answered it.

The score weighs the kind of fact as `drift.analysis.rank` does, whether a running
process has it (its environment, its command line, or its server's answer), and whether
it changed since the host's own last stable window.
"""

from __future__ import annotations

from drift.analysis.comparison import Finding, OddFact, host_names
from drift.analysis.kinds import category_rank
from drift.analysis.knobs import knob_match, live_knob
from drift.analysis.rank import WEIGHTS
from drift.names import natural_key


def ranked_findings(
    role: str, odd: dict[str, list[OddFact]], served: dict[str, dict[str, str]] | None = None
) -> list[Finding]:
    """Each odd host's differences as findings (an export and the live variable it gives
    are one; so is the server's report of it), best first. `served`: by host, the service
    whose server answers each endpoint."""
    scored: list[tuple[float, str, list[str], str, list[OddFact]]] = []
    for host, facts in odd.items():
        for title, group in _stories(host, facts, (served or {}).get(host, {})):
            score, reasons = _score(host, group)
            scored.append((score, title, reasons, host, group))
    scored.sort(
        key=lambda s: (-s[0], category_rank(s[4][0].kind), natural_key(s[3]), s[4][0].subject)
    )
    return [
        Finding(i, round(score, 3), host, role, title, reasons, group)
        for i, (score, title, reasons, host, group) in enumerate(scored, 1)
    ]


def _stories(
    host: str, facts: list[OddFact], served: dict[str, str]
) -> list[tuple[str, list[OddFact]]]:
    """The odd facts of one host, grouped: a variable's script line, its value in the live
    process, the script's text and its server's report of it are one story, rooted at the
    line."""
    by_variable: dict[str, list[OddFact]] = {}
    rest: list[OddFact] = []
    leaves: list[OddFact] = []
    for fact in sorted(facts, key=lambda f: (category_rank(f.kind), f.subject, f.key)):
        name = _variable(fact.key)
        if name is not None:
            by_variable.setdefault(name, []).append(fact)
        elif fact.subject in served and fact.key.startswith("json:"):
            leaves.append(fact)
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
    for leaf in leaves:
        owner = _knob_story(leaf, served[leaf.subject], [g for _t, g in stories])
        if owner is not None:
            owner.append(leaf)
        else:
            stories.append((_title(host, [leaf]), [leaf]))
    return stories


def _knob_story(leaf: OddFact, service: str, groups: list[list[OddFact]]) -> list[OddFact] | None:
    """The one group holding a live variable or flag of `service` whose knob the leaf reports
    best (`drift.analysis.knobs`); None when there is none, or two tie."""
    best, chosen = 0, []
    for group in groups:
        score = max(
            (
                knob_match(leaf.key.removeprefix("json:"), leaf.value, name, fact.value)
                for fact in group
                if fact.subject == f"service:{service}"
                and (name := live_knob(fact.key)) is not None
            ),
            default=0,
        )
        if score > best:
            best, chosen = score, [group]
        elif score == best and score:
            chosen.append(group)
    return chosen[0] if len(chosen) == 1 else None


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
    answered = [f for f in facts if f.subject.startswith("endpoint:")]
    reasons = [
        f"{host} alone of {count} hosts"
        if len(facts[0].majority.hosts) == count - 1
        else f"{host} and {count - 1 - len(facts[0].majority.hosts)} other host(s) differ "
        f"from the {len(facts[0].majority.hosts)} that agree"
    ]
    if live:
        reasons.append("in a running process")
    elif answered:
        reasons.append("in a running server: its endpoint answered it")
    else:
        reasons.append("not seen in a running process (on disk or in a script)")
    if live and answered:
        leaf = answered[0]
        endpoint = leaf.subject.removeprefix("endpoint:")
        pointer = leaf.key.removeprefix("json:")
        said = f"{pointer} = {leaf.value}" if leaf.value is not None else f"no {pointer}"
        reasons.append(f"the running server answers it: {endpoint} {said}")
    live = live or bool(answered)
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
