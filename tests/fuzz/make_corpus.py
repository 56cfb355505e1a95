#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (tests/fuzz/corpus/<target>/): small valid inputs, a
few KB each, built here from the formats' documentation (docs/, src/model/*.h) so that the
fuzzers start from inputs that reach deep into each parser. Run from anywhere:
    tests/fuzz/make_corpus.py
"""
import json
import os
import struct
import random

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
rng = random.Random(14)


def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- safetensors: u64 header length, JSON header, data ------------------------------
def safetensors(tensors, metadata=None):
    header, blob = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + blob


put("fuzz_safetensors", "f32", safetensors([("w", "F32", [2, 3], struct.pack("<6f", 1, -2, 0.5, 0, 3, -0.25))]))
put("fuzz_safetensors", "f16_bf16", safetensors([
    ("a", "F16", [4], struct.pack("<4H", 0x3C00, 0xBC00, 0x0001, 0x7BFF)),
    ("b", "BF16", [2, 2], struct.pack("<4H", 0x3F80, 0xC000, 0x0000, 0x8000)),
], {"format": "pt"}))
put("fuzz_safetensors", "scalar_i8", safetensors([("s", "F32", [], struct.pack("<f", 7)), ("i", "I8", [3], b"\x01\xff\x00")]))
put("fuzz_safetensors", "empty", safetensors([]))

# ---- config.json: models/kjv-ternary and the tiny / bitnet-large shapes ----------------
base = {"architectures": ["BitnetForCausalLM"], "model_type": "llama", "torch_dtype": "float16",
        "hidden_act": "silu", "hidden_size": 192, "intermediate_size": 512, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 2, "vocab_size": 512,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
        "rope_scaling": None, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": None}
put("fuzz_model_config", "tiny.json", json.dumps(base, indent=2))
large = dict(base, hidden_size=1536, intermediate_size=4096, num_hidden_layers=24, num_attention_heads=16,
             num_key_value_heads=16, vocab_size=32002, pad_token_id=32000, tie_word_embeddings=False)
put("fuzz_model_config", "bitnet_large.json", json.dumps(large))
minimal = {k: base[k] for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                                 "vocab_size", "rms_norm_eps", "max_position_embeddings")}
put("fuzz_model_config", "minimal.json", json.dumps(minimal))

# ---- board config: TOML, then "%%" and --set lines ---------------------------------
put("fuzz_board_params", "clock.toml", "[clock]\nmhz = 125.0\n[ddr]\nwall_gb_s = 2.009\nmax_pending_bursts = 16\n")
put("fuzz_board_params", "driver.toml", '[driver]\nprofile = "python"\n[driver.c]\nreg_access_ns = 200.0\n'
    "[cpu.ns_per_element]\nrope = 27.2881\n")
put("fuzz_board_params", "sets", "%%\nclock.mhz=100\nmatmul.pipeline_depth=4\ndma.length_bits=26\nattention.drain=4\n")
put("fuzz_board_params", "both", "[hp]\nmax_burst_beats = 8\n\n%%\nhp.max_outstanding_reads=4\ncma.mib=64\n")
# The DDR3 keys and their relations (docs/ddr3.md, "Relations between the keys"): the board's
# device under ddr3, a refresh at the edge of its interval, a device smaller than the map.
put("fuzz_board_params", "ddr3.toml", '[ddr]\nmodel = "ddr3"\n[ddr3]\nclock_mhz = 666.667\ncl = 9\ntrcd = 9\n'
    'trp = 9\ntras = 24\ntrc = 33\ntrfc = 200\ntrefi = 5184\nbus_bytes = 4\nrows = 16384\n')
put("fuzz_board_params", "ddr3_relations", '[ddr3]\ntrfc = 4032\ntrefi = 4064\nbanks = 2\n\n%%\n'
    'ddr3.trc=25\nddr3.banks=8\nprefill.all_logits=1\n')

# ---- tokenizer: text ----------------------------------------------------------------
put("fuzz_tokenizer", "english", "In the beginning God created the heaven and the earth.")
put("fuzz_tokenizer", "utf8", "naïve café – 日本語 ▁ emoji \U0001F600 tab\tnewline\n")
put("fuzz_tokenizer", "bytes", bytes([0xff, 0xc3, 0x28, 0xe2, 0x82, 0x00, 0x41, 0xf0, 0x9f]))


# ---- matmul stream: groups of header, x, packed rows (model/packed_image.h) -----------
def pack_row(trits):
    out = bytearray()
    for i in range(0, len(trits), 5):
        chunk = trits[i:i + 5] + [0] * (5 - len(trits[i:i + 5]))
        out.append(sum((t + 1) * 3 ** k for k, t in enumerate(chunk)))
    out += b"\x00" * (-len(out) % 8)
    return bytes(out)


def group(n, rows, last):
    hdr = struct.pack("<HBBI", 0x7E44, 2, 1 if last else 0, rows) + struct.pack("<II", n, 0)
    x = bytes(rng.randrange(256) for _ in range(n))
    x += b"\x00" * (-len(x) % 8)
    body = b"".join(pack_row([rng.choice((-1, 0, 1)) for _ in range(n)]) for _ in range(rows))
    return hdr + x + body


put("fuzz_matmul_stream", "one_group", group(13, 3, True))
put("fuzz_matmul_stream", "two_groups", group(40, 2, False) + group(7, 4, True))
put("fuzz_matmul_stream", "wide", group(192, 2, True))


# ---- attention stream: header, q, K, V (model/attention_stream.h) --------------------
def head(T, m, shift, legacy=False, last=True):
    flags = (1 if last else 0) | (2 if legacy else 0)
    hdr = struct.pack("<HBBI", 0xA77E, 1, flags, T) + struct.pack("<Q", m | (shift << 24))
    return hdr + bytes(rng.randrange(256) for _ in range(96 * (1 + 2 * T)))


put("fuzz_attention_stream", "t1", head(1, 1 << 17, 24))
put("fuzz_attention_stream", "t5", head(5, 123457, 30))
put("fuzz_attention_stream", "legacy", head(3, 0, 0, legacy=True))
put("fuzz_attention_stream", "big_m", head(2, (1 << 18) - 1, 63))


# A shared-stream pass (flags bit 5, G in beat 1 bits 43:40): q_0, then per member a beat of
# (m, S) and its q, then the rows once (docs/variants-attention.md 9).
def shared_pass(T, G):
    hdr = struct.pack("<HBBI", 0xA77E, 1, 1 | 32, T) + struct.pack("<Q", 1000 | (24 << 24) | (G << 40))
    body = bytes(rng.randrange(256) for _ in range(96))
    for g in range(1, G):
        body += struct.pack("<Q", (2000 + g) | ((20 + g) << 24)) + bytes(rng.randrange(256) for _ in range(96))
    return hdr + body + bytes(rng.randrange(256) for _ in range(96 * 2 * T))


put("fuzz_attention_stream", "shared_g3", shared_pass(4, 3))

# ---- MMIO program text (docs/mmio-record.md) --------------------------------------
put("fuzz_mmio_program", "example", """bitsim-mmio 1
C clock.mhz 125
M 0 100000 16 447e0201030000000300000000000000
W 1000000 40400030 00000004 200000
W 1200000 40400030 00010001 200000
W 1400000 40400048 00200000 200000
W 1600000 40400058 00001000 200000
W 1800000 40400018 00100000 200000
W 2000000 40400028 000002e8 200000
R 2200000 40400034 00010000 200000
R 9600000 40400034 00011002 200000
D 9800000 200000 800 9c0a3b2f44e1d7a0
""")
put("fuzz_mmio_program", "comments", "bitsim-mmio 1\n# a comment\n\nC dma.length_bits 23\nR 5 40400004 0 1\n")
# ---- MMIO replay: bytes the target turns into a program (FuzzedDataProvider) ----------
seeds = random.Random(5)
for i in range(4):
    put("fuzz_mmio_replay", "seed%d" % i, bytes(seeds.randrange(256) for _ in range(200)))
print("corpora written under", ROOT)
