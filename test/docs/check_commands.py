#!/usr/bin/python3
"""Every command that README.md and docs/ show exists with the options shown: a script of
scripts/ or bench/ (each --option must be one the script handles), a zklock subcommand and its
options (from `zklock --help`), an example program's options (from its source).
Usage: check_commands.py REPO_ROOT [ZKLOCK_BINARY]"""
import glob
import os
import re
import shlex
import subprocess
import sys

import doc_pages

root = sys.argv[1]
cli = sys.argv[2] if len(sys.argv) > 2 else None
cli_help = None  # subcommand ("" for the program) -> its --help text
if cli:
    cli_help = {}
    for sub in ("", "run", "list", "break", "revoke", "leader"):
        out = subprocess.run([cli] + ([sub] if sub else []) + ["--help"], capture_output=True, text=True, timeout=30)
        cli_help[sub] = out.stdout + out.stderr
examples = {os.path.basename(f): open(f).read() for f in glob.glob(os.path.join(root, "examples", "*.cpp"))}


def commands(path):
    """(line, command text) for each line of a sh block and each inline `scripts/...` span."""
    inb = False
    for i, l in enumerate(open(path).read().splitlines(), 1):
        s = l.strip()
        if s.startswith("```"):
            inb = (not inb) and s in ("```sh", "```bash", "```shell", "```console")
            continue
        if inb:
            if s:
                yield i, s
        else:
            for m in re.finditer(r"`((?:scripts|bench|build)/[^`]+|zklock (?:run|list|break|revoke|leader)\b[^`]*)`", l):
                yield i, m.group(1)


def options(words):
    return [w.split("=")[0] for w in words if w.startswith("--") and len(w) > 2]


def check(cmd):
    """An error message, or None."""
    cmd = cmd.split("  #")[0].split(" # ")[0]
    for part in re.split(r"&&|\|\||;|\|", cmd):
        try:
            words = shlex.split(part.replace("$(", " ").replace(")", " ").replace('"', " "), posix=True)
        except ValueError:
            words = part.split()
        while words and ("=" in words[0] and not words[0].startswith("-") or words[0] in ("sudo", "eval", "export")):
            words = words[1:]
        if not words:
            continue
        prog, args = words[0], words[1:]
        if "--" in args:  # zklock run ... -- COMMAND: the command is the user's
            args = args[: args.index("--")]
        if prog.startswith(("scripts/", "bench/")):
            if "/results/" in prog or prog.endswith("/") or "*" in prog:
                continue  # a file or folder named in passing, not a command
            f = os.path.join(root, prog)
            if not os.path.isfile(f):
                return "%s: no such script" % prog
            text = open(f).read()
            # (a script that hands "$@" to an example program takes that program's options too)
            also = "".join(examples.values()) if '"$@"' in text else ""
            for o in options(args):
                if o not in text and o not in also:
                    return "%s: the script has no option %s" % (prog, o)
        elif prog.startswith("build/examples/"):
            for o in options(args):
                if not any(o in t for t in examples.values()):
                    return "%s: no example program handles %s" % (prog, o)
        elif prog == "zklock":
            if cli_help is None:
                continue
            sub = args[0] if args and not args[0].startswith("-") else ""
            if sub not in cli_help:
                return "zklock: no subcommand %s in zklock --help" % sub
            for o in options(args):
                if not re.search(re.escape(o) + r"\b", cli_help[sub]):
                    return "zklock %s: no option %s in its --help" % (sub, o)
    return None


def problem(cmd):
    err = check(cmd)
    return err and "%s (in: %s)" % (err, cmd)


count, pages = doc_pages.check_pages(root, commands, problem)
print("check_commands: %d commands in %d files exist with the options shown%s"
      % (count, pages, "" if cli_help is not None else " (zklock itself not checked: no binary given)"))
