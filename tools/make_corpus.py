#!/usr/bin/python3
"""Extracts the training corpus of models/kjv-ternary from Debian's bible-kjv-text package.

The King James Version (public domain) is read through the package's `bible` program, one
verse per line ("Ge1:1 In the beginning ..."). A document is one chapter (1,189 of them);
its text is the chapter's verses joined by single spaces, on one line, and the documents of
a split are joined by newlines in canonical order. The split is fixed by the chapter's
name: sha256("<book><chapter>") mod 100 < 4 is test, < 8 is validation, the rest training.

    tools/make_corpus.py OUT_DIR [--test-copy models/kjv-ternary/test.txt]

writes OUT_DIR/{train,valid,test}.txt and prints their sizes and sha256 hashes (recorded in
models/README.md). Needs `apt-get install bible-kjv` (which brings bible-kjv-text).
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def split_of(chapter: str) -> str:
    h = int(hashlib.sha256(chapter.encode()).hexdigest(), 16) % 100
    return "test" if h < 4 else "valid" if h < 8 else "train"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--test-copy", help="also copy test.txt here")
    args = ap.parse_args()
    if shutil.which("bible") is None:
        print("make_corpus: the `bible` program is missing: apt-get install bible-kjv", file=sys.stderr)
        return 2
    raw = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True,
                         text=True, encoding="utf-8", env={**os.environ, "COLUMNS": "100000"}).stdout
    chapters = []  # (name, [verse texts]) in canonical order
    for line in raw.splitlines():
        line = line.rstrip()
        if not line:
            continue
        m = VERSE.match(line)
        if not m:
            raise SystemExit(f"make_corpus: unexpected line from bible: {line[:80]!r}")
        name = m.group(1) + m.group(2)
        if not chapters or chapters[-1][0] != name:
            chapters.append((name, []))
        chapters[-1][1].append(m.group(4).strip())
    nverses = sum(len(v) for _, v in chapters)
    if len(chapters) != 1189 or nverses != 31102:
        raise SystemExit(f"make_corpus: expected 1189 chapters / 31102 verses, got {len(chapters)} / {nverses}")
    docs = {"train": [], "valid": [], "test": []}
    for name, verses in chapters:
        docs[split_of(name)].append(" ".join(verses))
    os.makedirs(args.out_dir, exist_ok=True)
    for split, lines in docs.items():
        data = ("\n".join(lines) + "\n").encode("utf-8")
        path = os.path.join(args.out_dir, f"{split}.txt")
        with open(path, "wb") as f:
            f.write(data)
        print(f"{split}: {len(lines)} chapters, {len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()}")
    if args.test_copy:
        shutil.copyfile(os.path.join(args.out_dir, "test.txt"), args.test_copy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
