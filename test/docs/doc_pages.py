"""What the docs checks share: the pages they read, and how they report."""
import glob
import os
import sys


def pages(root):
    """README.md and every page of docs/."""
    return [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))


def check_pages(root, items_of, problem_of):
    """For each page, each (line, item) of items_of(page): problem_of(item) is None or what is
    wrong. Prints each problem as file:line: ...; exits 1 if any. Returns (items, pages)."""
    files = pages(root)
    bad = count = 0
    for f in files:
        for line, item in items_of(f):
            count += 1
            problem = problem_of(item)
            if problem:
                bad += 1
                print("%s:%d: %s" % (os.path.relpath(f, root), line, problem))
    if bad:
        sys.exit(1)
    return count, len(files)
