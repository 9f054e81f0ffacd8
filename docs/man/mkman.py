#!/usr/bin/env python3
"""Render nsctl's man pages from its own help text, the one source of what each command
takes: `nsctl --help` (the commands and their one-line summaries) gives nsctl(1), and
`nsctl CMD --help` gives nsctl-CMD(1).

    mkman.py NSCTL OUTDIR VERSION COMMAND...

COMMAND...: the commands meson expects pages for; a command nsctl lists but the build does
not (or the reverse) fails the build instead of going without its page.

Help text shape (nsctl/cmd_*.c): a "usage: ..." line, then free lines, section headers
("options:") flush left, and options indented two spaces with their description after two or
more spaces, continued on lines indented further. Anything else is kept as a paragraph line.
"""
import os
import re
import subprocess
import sys

OPTION = re.compile(r"^ {1,4}(-\S.*?|[A-Z][A-Z_/\[\]:|.]*\S*)(?: {2,}(\S.*))?$")
SECTION = re.compile(r"^([a-z][a-z -]*):$")


def esc(text):
    """roff-escape one line of text."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def help_of(nsctl, args):
    res = subprocess.run([nsctl] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=30, check=False)
    if res.returncode != 0:
        sys.exit("mkman: %s %s exited %d" % (nsctl, " ".join(args), res.returncode))
    return res.stdout.decode()


def header(name, version, summary):
    return [
        '.TH %s 1 "" "neurostream %s" "neurostream manual"' % (name.upper(), version),
        ".SH NAME",
        "%s \\- %s" % (esc(name), esc(summary)),
    ]


def body(lines):
    """The help text after its usage lines, as roff."""
    out = [".SH DESCRIPTION"]
    in_tp = False
    for line in lines:
        if not line.strip():
            out.append(".PP")
            in_tp = False
            continue
        m = SECTION.match(line)
        if m:
            out.append(".SS %s" % esc(m.group(1).upper()))
            in_tp = False
            continue
        m = OPTION.match(line)
        if m and (m.group(2) or line.lstrip().startswith("-")):
            out += [".TP", "\\fB%s\\fR" % esc(m.group(1))]
            if m.group(2):
                out.append(esc(m.group(2)))
            in_tp = True
            continue
        if not in_tp:
            out.append(".br")
        out.append(esc(line.strip()))
    return out


def synopsis(usage_lines):
    out = [".SH SYNOPSIS", ".nf"]
    out += ["\\fB%s\\fR" % esc(u[len("usage: "):].strip()) for u in usage_lines]
    return out + [".fi"]


def split_usage(text):
    lines = text.rstrip("\n").split("\n")
    usage = [ln for ln in lines if ln.startswith("usage: ")]
    rest = [ln for ln in lines if not ln.startswith("usage: ")]
    if not usage:
        sys.exit("mkman: no usage line in:\n" + text)
    return usage, rest


ENVIRONMENT = [
    ".SH ENVIRONMENT",
    ".TP", "\\fBNS_LIBEXECDIR\\fR",
    "Directory of the helper processes (nsio, nsplan, nscompute, nsrouter) instead of the "
    "libexec directory of the prefix the library was installed in.",
    ".TP", "\\fBNS_NSIO\\fR, \\fBNS_NSCOMPUTE\\fR, \\fBNS_NSPLAN\\fR, \\fBNS_NSROUTER\\fR",
    "One helper's executable (NS_NSROUTER=off: none).",
]


def main():
    if len(sys.argv) < 5:
        sys.exit("usage: mkman.py NSCTL OUTDIR VERSION COMMAND...")
    nsctl, outdir, version = sys.argv[1:4]
    top = help_of(nsctl, ["--help"])
    commands = re.findall(r"^  (\S+) +(.*)$", top, re.M)
    if not commands:
        sys.exit("mkman: no commands in nsctl --help")
    if sorted(n for n, _ in commands) != sorted(sys.argv[4:]):
        sys.exit("mkman: nsctl has the commands %s, the build expects %s (nsctl/meson.build)"
                 % (sorted(n for n, _ in commands), sorted(sys.argv[4:])))
    pages = {}
    page = header("nsctl", version, "run transformer models larger than memory")
    page += [".SH SYNOPSIS", "\\fBnsctl\\fR \\fICOMMAND\\fR [\\fIARGS\\fR]", ".SH COMMANDS"]
    for name, summary in commands:
        page += [".TP", "\\fB%s\\fR" % esc(name), esc(summary)]
    page += ENVIRONMENT
    page += [".SH SEE ALSO", ", ".join("\\fBnsctl\\-%s\\fR(1)" % esc(n) for n, _ in commands)]
    pages["nsctl.1"] = page
    for name, summary in commands:
        usage, rest = split_usage(help_of(nsctl, [name, "--help"]))
        short = summary.split(": nsctl ")[0]
        page = header("nsctl-" + name, version, short) + synopsis(usage) + body(rest)
        page += [".SH SEE ALSO", "\\fBnsctl\\fR(1)"]
        pages["nsctl-%s.1" % name] = page
    os.makedirs(outdir, exist_ok=True)
    for fname, lines in pages.items():
        with open(os.path.join(outdir, fname), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
