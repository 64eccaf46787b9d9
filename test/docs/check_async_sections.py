#!/usr/bin/python3
"""Every public asynchronous operation of include/zklock (a function named async_*) documents
the same sections, in this order: completion signature, executor, per-operation cancellation,
errors, object lifetimes, thread safety (the Doxygen aliases of docs/reference/Doxyfile).

  check_async_sections.py ROOT
"""
import os
import re
import sys

SECTIONS = ["\\signature", "\\executor", "\\cancellation", "\\errors", "\\lifetimes", "\\threadsafety"]
root = sys.argv[1] if len(sys.argv) > 1 else "."
inc = os.path.join(root, "include", "zklock")
problems, count = [], 0
for name in sorted(os.listdir(inc)):
    if not name.endswith(".hpp"):
        continue
    lines = open(os.path.join(inc, name)).read().split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:auto|[\w:<>]+)\s+(async_\w+)\(", line)
        if not m or line.rstrip().endswith(";"):  # (a declaration of an implementation detail)
            continue
        # the doc block: the /// lines above the template line(s)
        j = i - 1
        while j >= 0 and i - j <= 4 and not lines[j].strip().startswith("///") and lines[j].strip() not in ("", "}", "};"):
            j -= 1  # (the template declaration, over one line or several)
        block = []
        while j >= 0 and lines[j].strip().startswith("///"):
            block.insert(0, lines[j].strip())
            j -= 1
        text = "\n".join(block)
        count += 1
        where = f"include/zklock/{name}:{i + 1}: {m.group(1)}"
        found = [s for s in SECTIONS if re.search(re.escape(s) + r"\b", text)]
        if found != SECTIONS:
            missing = [s for s in SECTIONS if s not in found]
            problems.append(f"{where}: " + (f"missing {' '.join(missing)}" if missing else "sections out of order"))
        elif [text.index(s) for s in SECTIONS] != sorted(text.index(s) for s in SECTIONS):
            problems.append(f"{where}: sections out of order")
for p in problems:
    print(p, file=sys.stderr)
if problems or count == 0:
    print(f"check_async_sections: {len(problems)} of {count} operations lack the sections", file=sys.stderr)
    sys.exit(1)
print(f"check_async_sections: {count} asynchronous operations, each with the six sections")
