#!/usr/bin/env python3
"""Checks deploy/grafana/pdserve.json against the code, so it cannot rot.

The dashboard must parse as JSON, every panel must have a unique id and a
title, every query target an expr, and every pdserve_* name an expr uses
must be a metric the C++ sources register (a "pdserve_..." string literal),
allowing the _bucket/_sum/_count series of a histogram.

Usage: check_dashboard.py [--selftest] DASHBOARD_JSON SOURCE_DIR...
Exit status 0 when it passes; 1 with one line per problem otherwise.
--selftest instead checks that broken copies of the dashboard fail.
"""
import json
import pathlib
import re
import sys

METRIC = re.compile(r"\bpdserve_[a-z0-9_]+")
LITERAL = re.compile(r'"(pdserve_[a-z0-9_]+)"')
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def registered_names(source_dirs):
    names = set()
    for d in source_dirs:
        for path in pathlib.Path(d).rglob("*"):
            if path.suffix in (".cc", ".h") and "test" not in path.name:
                names.update(LITERAL.findall(path.read_text(errors="replace")))
    return names


def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels", []))


def known(name, registered):
    if name in registered:
        return True
    return any(name.endswith(s) and name[: -len(s)] in registered for s in HISTOGRAM_SUFFIXES)


def check(dashboard, registered):
    problems = []
    ids = set()
    panels = list(all_panels(dashboard.get("panels", [])))
    if not panels:
        problems.append("no panels")
    for p in panels:
        title = p.get("title", "")
        if not title:
            problems.append(f"panel {p.get('id')} has no title")
        if p.get("id") in ids:
            problems.append(f"duplicate panel id {p.get('id')} ({title})")
        ids.add(p.get("id"))
        if p.get("type") == "row":
            continue
        targets = p.get("targets", [])
        if not targets:
            problems.append(f"panel '{title}' has no targets")
        for t in targets:
            expr = t.get("expr", "")
            names = METRIC.findall(expr)
            if not names:
                problems.append(f"panel '{title}': expr references no pdserve metric: {expr!r}")
            for n in names:
                if not known(n, registered):
                    problems.append(f"panel '{title}': {n} is not registered by the code")
    return problems


def selftest(dashboard, registered):
    """Each broken copy must be reported; returns the ones that were not."""
    text = json.dumps(dashboard)
    name = METRIC.search(text).group(0)
    broken = {
        "unregistered metric": json.loads(text.replace(name, name + "_typo", 1)),
        "no metric in an expr": json.loads(re.sub(r'"expr": "[^"]*"', '"expr": "up"', text, 1)),
        "duplicate panel id": json.loads(text),
        "no panels": {"panels": []},
    }
    panels = broken["duplicate panel id"]["panels"]
    panels[1]["id"] = panels[0]["id"]
    return [what for what, d in broken.items() if not check(d, registered)]


def main(argv):
    if len(argv) >= 2 and argv[1] == "--selftest":
        argv = argv[:1] + argv[2:]
        dashboard = json.loads(pathlib.Path(argv[1]).read_text())
        missed = selftest(dashboard, registered_names(argv[2:]))
        for what in missed:
            print(f"selftest: a dashboard with {what} passed the check")
        return 1 if missed else 0
    if len(argv) < 3:
        print(__doc__)
        return 2
    try:
        dashboard = json.loads(pathlib.Path(argv[1]).read_text())
    except (OSError, json.JSONDecodeError) as e:
        print(f"{argv[1]}: {e}")
        return 1
    registered = registered_names(argv[2:])
    if not registered:
        print("no registered pdserve_* metric found in", argv[2:])
        return 1
    problems = check(dashboard, registered)
    for p in problems:
        print(p)
    if not problems:
        print(f"ok: {len(list(all_panels(dashboard['panels'])))} panels, "
              f"{len(registered)} registered metrics")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
