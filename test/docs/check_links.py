#!/usr/bin/python3
"""Every relative link of the documentation resolves.

    check_links.py REPO_ROOT

Reads README.md, docs/*.md and bench/results/history.md. For each Markdown link or image,
[text](target) or ![alt](target) (and reference definitions, [label]: target), whose target is
relative (not http:, https:, mailto:), the path without its #anchor must exist, relative to the
Markdown file's directory. For file.md#anchor and #anchor, the anchor must also name a heading of
that file, by GitHub's rule: lowercase; characters other than letters, digits, spaces, hyphens and
underscores removed; spaces to hyphens (a repeated heading gets -1, -2, ...). Links inside fenced
code blocks and inline code spans are ignored. Prints each broken link as
"file:line: broken link target (reason)" and exits 1 if there is any; else one line with the count.
"""
import glob
import os
import re
import sys
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
INLINE_CODE = re.compile(r"(`+)((?:[^`\n]|`(?!\1)|\n(?![ \t]*\n))+?)\1")
# [text](target) and ![alt](target); the target may be in <...> and followed by a "title"
LINK = re.compile(r"!?\[(?:[^\[\]\n]|\n(?![ \t]*\n)|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFDEF = re.compile(r"(?m)^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
EXTERNAL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")  # http:, https:, mailto:, ...


def markdown_lines(path):
    """(line number, text) of every line outside fenced code blocks."""
    fence = None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            m = FENCE.match(line)
            if fence is None:
                if m:
                    fence = m.group(1)
                    continue
                yield n, line
            elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):
                fence = None


def slug(text):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading counts as its text
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen, found = {}, set()
        for _, line in markdown_lines(path):
            m = HEADING.match(line)
            if not m:
                continue
            text = re.sub(r"[ \t]+#+$", "", m.group(2) or "")
            s = slug(text)
            k = seen.get(s, 0)
            seen[s] = k + 1
            found.add(s if k == 0 else "%s-%d" % (s, k))
        _anchors[path] = found
    return _anchors[path]


def links(path):
    """(line number, target) of every link, image and reference definition outside fenced code
    blocks and inline code spans. A link's text may run over several lines of one paragraph."""
    lines = {}
    for n, line in markdown_lines(path):
        lines[n] = line
    last = max(lines) if lines else 0
    # the text with fenced lines blanked, so that offsets map back to line numbers
    text = "\n".join(lines.get(n, "") for n in range(1, last + 1))
    starts = [0]
    for m in re.finditer("\n", text):
        starts.append(m.end())

    def line_of(offset):
        lo, hi = 0, len(starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    # inline code spans (within one paragraph) are blanked, keeping the offsets
    text = INLINE_CODE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    found = [(line_of(m.start(1)), m.group(1)) for m in LINK.finditer(text)]
    found += [(line_of(m.start(1)), m.group(1)) for m in REFDEF.finditer(text)]
    return sorted(found)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_links.py REPO_ROOT")
    root = os.path.abspath(sys.argv[1])
    files = [os.path.join(root, "README.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    history = os.path.join(root, "bench", "results", "history.md")
    if os.path.exists(history):
        files.append(history)
    broken, checked = [], 0
    for md in files:
        if not os.path.exists(md):
            broken.append("%s: missing" % os.path.relpath(md, root))
            continue
        rel = os.path.relpath(md, root)
        for n, target in links(md):
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            if not target or EXTERNAL.match(target):
                continue
            checked += 1
            path_part, _, anchor = target.partition("#")
            path_part = urllib.parse.unquote(path_part)
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path_part)) if path_part else md
            if not os.path.exists(dest):
                broken.append("%s:%d: broken link %s (no such file: %s)" % (rel, n, target, os.path.relpath(dest, root)))
                continue
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if urllib.parse.unquote(anchor).lower() not in anchors(dest):
                    broken.append("%s:%d: broken link %s (no heading #%s in %s)"
                                  % (rel, n, target, anchor, os.path.relpath(dest, root)))
    for b in broken:
        print(b)
    if broken:
        sys.exit(1)
    print("check_links: %d relative links in %d files resolve" % (checked, len(files)))


if __name__ == "__main__":
    main()
