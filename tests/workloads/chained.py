"""A seeded log of chained patches as RDF Patch text, for the target fault tests.

Each patch has ``H id``/``H prev``; one to three units of 5-30 rows, some ``TX … TA`` (aborted),
some rows outside a transaction; about a fifth of the rows delete a quad added earlier; a
tenth of the subjects are blank nodes; quads in the default graph and three named graphs;
plain, language-tagged and integer literals. (The bench's own workload is bench/apply_workload.py;
tests do not import bench.)
"""

from __future__ import annotations

import random
from pathlib import Path

EX = "http://example.org/c/"
_GRAPHS = ["", "", f" <{EX}g1>", f" <{EX}g2>", f" <{EX}g3>"]
_PROPS = [f"<{EX}{name}>" for name in ("name", "label", "count", "link")]


def chained_log(path: Path, patches: int, seed: int = 7) -> None:
    """Write ``patches`` chained patches to ``path`` (``.rdfp``)."""
    rng = random.Random(seed)
    live: list[str] = []
    lines: list[str] = []
    for n in range(patches):
        lines.append(f"H id <urn:c:{n}> .")
        if n:
            lines.append(f"H prev <urn:c:{n - 1}> .")
        units = rng.choice((1, 1, 2, 3))
        for u in range(units):
            implicit = u == units - 1 and rng.random() < 0.1
            aborted = not implicit and rng.random() < 0.1
            if not implicit:
                lines.append("TX .")
            added: list[str] = []
            for _ in range(rng.randint(5, 30)):
                if live and rng.random() < 0.2:
                    lines.append("D " + live.pop(rng.randrange(len(live))))
                    continue
                e = rng.randrange(5_000)
                s = f"_:b{e}" if e % 10 == 0 else f"<{EX}item/{e}>"
                p = rng.choice(_PROPS)
                if p == _PROPS[3]:
                    o = f"<{EX}item/{rng.randrange(5_000)}>"
                elif p == _PROPS[2]:
                    o = f'"{rng.randrange(10**6)}"^^<http://www.w3.org/2001/XMLSchema#integer>'
                else:
                    o = f'"value {n}.{rng.randrange(100)}"' + rng.choice(("", "@en", "@fr"))
                row = f"{s} {p} {o}{rng.choice(_GRAPHS)} ."
                lines.append("A " + row)
                added.append(row)
            if aborted:
                lines.append("TA .")
            else:
                live.extend(added)
                if not implicit:
                    lines.append("TC .")
        lines.append("Z .")  # the end of a patch (RDF Patch text, as Jena writes segments)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
