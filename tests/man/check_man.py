#!/usr/bin/env python3
"""The man page and the CLI's --help name the same flags, command by command.

    check_man.py TFCORE_EXE tools/tfcore.1

The commands are the ones `tfcore --help` lists; each must have a subsection
`.SS "tfcore CMD"` in the page. A command's flags are every `--flag` its
`--help` prints (lines that show another command, such as data's
"tfcore train --data-bin ..." hint, are that command's); the page's flags of a
command are every `\\-\\-flag` in its subsection. Both directions must agree,
and each difference is reported as the one line to act on.
"""
import re
import subprocess
import sys

FLAG = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def run_help(exe, args):
    p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
    return p.stdout + p.stderr


def commands(exe):
    """The commands `tfcore --help` lists: two-space-indented first words."""
    out = run_help(exe, ["--help"])
    cmds = re.findall(r"^  ([a-z][a-z-]*)\s", out, re.M)
    if not cmds:
        sys.exit("check_man: `tfcore --help` lists no commands:\n" + out)
    return cmds


def help_flags(exe, cmd):
    text = run_help(exe, [cmd, "--help"])
    flags = set()
    for line in text.splitlines():
        other = [c for c in re.findall(r"\btfcore ([a-z][a-z-]*)", line) if c != cmd]
        if other:
            continue  # a hint showing another command's flags
        flags.update(FLAG.findall(line))
    flags.discard("help")
    return flags, text


def page_sections(path):
    """{command: set of flags} of each `.SS "tfcore CMD"` subsection."""
    sections, cur = {}, None
    for line in open(path, encoding="utf-8"):
        if line.startswith(".\\\""):
            continue  # roff comment
        m = re.match(r'^\.S[SH]\s+"?tfcore ([a-z][a-z-]*)"?\s*$', line)
        if m:
            cur = m.group(1)
            sections[cur] = set()
            continue
        if line.startswith(".SH") or line.startswith(".SS"):
            cur = None
            continue
        if cur is not None:
            text = line.replace("\\-", "-").replace("\\fB", "").replace("\\fI", "").replace("\\fR", "")
            for m2 in re.finditer(r'(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)', text):
                # a hint that shows another command's flags is that command's
                before = text[: m2.start()]
                other = [c for c in re.findall(r"\btfcore ([a-z][a-z-]*)", before) if c != cur]
                if not other:
                    sections[cur].add(m2.group(1))
    return sections


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    exe, page = sys.argv[1], sys.argv[2]
    sections = page_sections(page)
    problems = []
    for cmd in commands(exe):
        flags, text = help_flags(exe, cmd)
        if not flags:
            # a command of positional arguments only (tfcore lora merge): its subsection documents none either
            if cmd in sections and not sections[cmd] and "usage: tfcore " + cmd in text:
                continue
            problems.append(f"tfcore {cmd} --help shows no flags:\n{text}")
            continue
        if cmd not in sections:
            problems.append(f'{page}: no subsection .SS "tfcore {cmd}" for the command tfcore {cmd} '
                            f"(its flags: {' '.join('--' + f for f in sorted(flags))})")
            continue
        for f in sorted(flags - sections[cmd]):
            problems.append(f'{page}: flag --{f} of `tfcore {cmd} --help` is missing from .SS "tfcore {cmd}"')
        for f in sorted(sections[cmd] - flags):
            problems.append(f'{page}: .SS "tfcore {cmd}" documents --{f}, which `tfcore {cmd} --help` does not show')
    # The page itself renders without groff warnings (as lintian checks it).
    try:
        g = subprocess.run(["groff", "-man", "-ww", "-z", page], capture_output=True, text=True, timeout=60)
        if g.returncode != 0 or g.stderr.strip():
            problems.append(f"{page}: groff -man -ww warns:\n{g.stderr}")
    except FileNotFoundError:
        print("check_man: groff not found; the page's roff is not checked")
    listed = set(commands(exe))
    for cmd in sorted(set(sections) - listed):
        problems.append(f'{page}: .SS "tfcore {cmd}" documents a command `tfcore --help` does not list')
    for p in problems:
        print("FAIL " + p)
    n = sum(len(s) for s in sections.values())
    if problems:
        print(f"check_man: {len(problems)} difference(s) between {page} and --help")
        return 1
    print(f"check_man: {len(sections)} commands, {n} flags, page and --help agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
