#!/usr/bin/env python3
"""Writes the two small byte-level BPE tokenizer.json files of tests/model/bpe_tokenizer_test.cpp
(docs/tokenizers.md). Run once; the files are committed, this script records how they were made.

The vocabulary: the 256 byte characters (GPT-2's bytes_to_unicode) as ids 0..255 in byte
order, then the merges that a plain BPE training on CORPUS (words split as " ?word",
" ?punctuation", spaces) learns, 90 of them, then HAND_MERGES, each merged token the next
id; then " xyz" (Ġxyz), in the vocabulary with no merge making it (only ignore_merges reaches
it). Added tokens at 400..403, leaving ids 364..399 without a token.

  llama3-small.json: Llama-3's Split pattern then ByteLevel (use_regex false), merges as
                     "a b" strings, ignore_merges true, special and non-special added tokens.
  gpt2-small.json:   ByteLevel (use_regex true), the same merges as [a, b] pairs, no
                     ignore_merges, one special token.
"""
import collections
import json
import os
import re

CORPUS = """Hello, world! The capital of France is Paris. The world is big and the sea is deep.
Hello there, the people of the world. 日本語のテキスト 日本 123 456 7890 3.14159
They're here and we've seen it; I'm sure you'll say it'd be the best. café naïve
"""

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


# Merges across the places where the two split patterns differ, so that the ids show the split:
# digits (Llama-3 cuts runs of 3), "(h" (Llama-3 keeps one non-letter before letters), 'LL
# (Llama-3's contractions ignore case), spaces and line ends.
HAND_MERGES = ["1 2", "12 3", "4 5", "45 6", "123 456", "( h", "(h ello", "' L", "'L L", "Ġ Ġ", "ĠĠ Ġ",
               "ĠĠĠ Ċ", "Ċ Ċ", "č Ċ", "! !", "!! Ċ", "!!Ċ Ċ"]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train(byte_char, count):
    words = collections.Counter(
        tuple(byte_char[b] for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\w\s]+|\s+", CORPUS))
    merges = []
    for _ in range(count):
        pairs = collections.Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        merged = collections.Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return merges


def added(id_, content, special, normalized=False):
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": normalized, "special": special}


def main():
    byte_char = bytes_to_unicode()
    vocab = {byte_char[b]: b for b in range(256)}
    merges = train(byte_char, 90) + [tuple(m.split(" ")) for m in HAND_MERGES]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    vocab["Ġxyz"] = len(vocab)
    here = os.path.dirname(os.path.abspath(__file__))
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    llama3 = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(400, "<|begin_of_text|>", True), added(401, "<|end_of_text|>", True),
                         added(402, "<|eot_id|>", True), added(403, "<tool>", False, True)],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3}, "behavior": "Isolated", "invert": False},
            dict(byte_level, use_regex=False)]},
        "post_processor": None,
        "decoder": dict(byte_level, use_regex=True),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    gpt2 = json.loads(json.dumps(llama3))
    gpt2["added_tokens"] = [added(400, "<|endoftext|>", True)]
    gpt2["pre_tokenizer"] = dict(byte_level, use_regex=True)
    gpt2["model"]["ignore_merges"] = False
    gpt2["model"]["merges"] = [[a, b] for a, b in merges]
    for name, doc in (("llama3-small.json", llama3), ("gpt2-small.json", gpt2)):
        with open(os.path.join(here, name), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
