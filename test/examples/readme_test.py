#!/usr/bin/python3
"""The README's short example is examples/1_tutorial.cpp as it is: the suite compiles and runs
that file, so the README cannot show code that does not build."""
import sys

readme, example = sys.argv[1], sys.argv[2]
text = open(readme).read()
at = text.index("## A short example")
start = text.index("```cpp\n", at) + len("```cpp\n")
end = text.index("```", start)
shown = text[start:end]
code = open(example).read()
if shown != code:
    sys.exit("README.md's short example differs from %s: copy the file into the README" % example)
print("README.md shows %s as it is (%d lines)" % (example, code.count("\n")))
