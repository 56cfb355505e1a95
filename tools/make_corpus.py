#!/usr/bin/python3
"""Extracts the training corpus of models/kjv-ternary from Debian's bible-kjv-text package.

The King James Version (public domain) is read through the package's `bible` program, one
verse per line ("Ge1:1 In the beginning ..."). A document is one chapter (1,189 of them);
its text is the chapter's verses joined by single spaces, on one line, and the documents of
a split are joined by newlines in canonical order. The split is fixed by the chapter's
name: sha256("<book><chapter>") mod 100 < 4 is test, < 8 is validation, the rest training.

    tools/make_corpus.py OUT_DIR [--test-copy models/kjv-ternary/test.txt]

writes OUT_DIR/{train,valid,test}.txt, prints their sizes and sha256 hashes (recorded in
models/README.md), and trains OUT_DIR/tokenizer.model on train.txt with Debian's spm_train
(SPM_FLAGS below). Needs `apt-get install bible-kjv sentencepiece`.
"""
import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys

# Our SentencePiece model: unigram, 2,048 pieces, byte fallback (any input encodes), the
# LLaMA id conventions (0 <unk>, 1 <s>, 2 </s>, 3..258 the bytes), no normalization and no
# whitespace folding (decode(encode(text)) == text), one thread (reproducible).
SPM_FLAGS = ["--input=train.txt", "--model_prefix=tokenizer", "--vocab_size=2048", "--model_type=unigram",
             "--character_coverage=1.0", "--byte_fallback=true", "--unk_id=0", "--bos_id=1", "--eos_id=2",
             "--pad_id=-1", "--normalization_rule_name=identity", "--remove_extra_whitespaces=false",
             "--max_sentence_length=20000", "--num_threads=1"]

VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")


def split_of(chapter: str) -> str:
    h = int(hashlib.sha256(chapter.encode()).hexdigest(), 16) % 100
    return "test" if h < 4 else "valid" if h < 8 else "train"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--test-copy", help="also copy test.txt here")
    ap.add_argument("--no-tokenizer", action="store_true", help="do not train OUT_DIR/tokenizer.model")
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
    if not args.no_tokenizer:
        if shutil.which("spm_train") is None:
            print("make_corpus: spm_train is missing: apt-get install sentencepiece", file=sys.stderr)
            return 2
        # Run inside OUT_DIR with relative names: the trainer records them in the model file.
        with open(os.path.join(args.out_dir, "spm_train.log"), "w") as log:
            subprocess.run(["spm_train"] + SPM_FLAGS, cwd=args.out_dir, check=True, stdout=log, stderr=log)
        tok = os.path.join(args.out_dir, "tokenizer.model")
        with open(tok, "rb") as f:
            print(f"tokenizer.model: sha256 {hashlib.sha256(f.read()).hexdigest()}")
    if args.test_copy:
        shutil.copyfile(os.path.join(args.out_dir, "test.txt"), args.test_copy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
