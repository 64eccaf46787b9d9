#!/usr/bin/python3
"""Every C++ block in README.md and docs/*.md is code the suite compiles: its lines (leading
white space aside) appear, in order and together, in a file under examples/ or include/zklock/.
Usage: check_snippets.py REPO_ROOT"""
import glob
import os
import sys

import doc_pages

root = sys.argv[1]
sources = {}
for pattern in ("examples/*.cpp", "include/zklock/*.hpp", "include/zklock.hpp"):
    for f in sorted(glob.glob(os.path.join(root, pattern))):
        sources[os.path.relpath(f, root)] = [l.strip() for l in open(f).read().splitlines()]


def blocks(path):
    lines = open(path).read().splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() in ("```cpp", "```c++"):
            start = i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            yield start + 1, lines[start:j]
            i = j
        i += 1


def found(block):
    want = [l.strip() for l in block if l.strip()]
    if not want:
        return True
    for name, have in sources.items():
        have_ne = [l for l in have if l]
        n = len(want)
        for k in range(len(have_ne) - n + 1):
            if have_ne[k:k + n] == want:
                return True
    return False


def problem(block):
    if found(block):
        return None
    return "a C++ block that is in no file of examples/ or include/zklock/ (first line: %s)" % (
        block[0].strip() if block else "")


count, pages = doc_pages.check_pages(root, blocks, problem)
print("check_snippets: %d C++ blocks in %d files, each one taken from examples/ or include/zklock/" % (count, pages))
