"""Count the lines a `spade train` console shows, by source: spade's own, the model engine's, and other.

Runs the command given after ``--`` with stdout and stderr merged (as a terminal shows them) and prints the
counts, or counts a saved console with ``--file``::

    python bench/console_lines.py -- spade train --preset cpu-tiny --steps 1 --runs-dir /tmp/r --name c
    python bench/console_lines.py --file console.txt

spade's lines: progress lines (``[   12.3s] ...``), the run summary and the lines ``spade`` itself prints.
Engine lines: vLLM's and transformers' log lines (``INFO``/``WARNING``/``ERROR`` with a date), progress
bars, and native or Python warnings. Everything else is "other" (printed as it is counted, to be read).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

SPADE = re.compile(
    r"^(\[\s*\d+\.\ds\] |spade |Summary of |  (designer|agent|return|held-out)|Run finished|Engine output|"
    r"The engine's last lines|  \| |Engine output goes to)"
)
ENGINE = re.compile(
    r"^(\(\w+ pid=\d+\) )?(INFO|WARNING|ERROR|DEBUG|CRITICAL)\b|^\S+\.py:\d+: \w*Warning|^\s*warnings\.warn|"
    r"it/s\]|s/it\]|\d+%\|"
)


def classify(line: str) -> str:
    """``spade``, ``engine`` or ``other``."""
    if SPADE.match(line):
        return "spade"
    if ENGINE.search(line):
        return "engine"
    return "other"


def count(text: str) -> tuple[Counter[str], list[str]]:
    """Lines by source (carriage-return updates count as the one line they end in), and the "other" lines."""
    counts: Counter[str] = Counter()
    other = []
    for raw in text.splitlines():
        line = raw.rsplit("\r", 1)[-1].replace("\x1b[K", "")
        if not line.strip():
            continue
        source = classify(line)
        counts[source] += 1
        if source == "other":
            other.append(line)
    return counts, other


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--file", type=Path, help="a saved console to count instead of running a command")
    parser.add_argument("--save", type=Path, help="also write the console the command printed here")
    parser.add_argument("command", nargs="*", help="the command to run (after --)")
    args = parser.parse_args(argv)
    if args.file is not None:
        text = args.file.read_text(errors="replace")
    elif args.command:
        done = subprocess.run(args.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        text = done.stdout.decode(errors="replace")
        print(f"exit status {done.returncode}")
    else:
        parser.error("give --file or a command after --")
    if args.save is not None:
        args.save.write_text(text)
    counts, other = count(text)
    for line in other:
        print(f"  other: {line[:150]}")
    total = sum(counts.values())
    print(f"lines {total}: spade {counts['spade']}, engine {counts['engine']}, other {counts['other']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
