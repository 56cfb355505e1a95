#!/usr/bin/env python3
"""List the tensors of a safetensors file: name, dtype, shape (one per line, header order).

An independent reader (standard library only: json + struct) used to check that the files
bitsim writes are ordinary safetensors files. Validates the header the way the reference
implementation does and exits non-zero, with the reason on stderr, if the file is malformed.

usage: read_safetensors.py FILE.safetensors [--metadata]
"""
import json
import struct
import sys

DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
MAX_HEADER = 100 * 1024 * 1024


class Malformed(Exception):
    pass


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def read_header(path):
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise Malformed("file is shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        f.seek(0, 2)
        size = f.tell()
        if n > MAX_HEADER or n > size - 8:
            raise Malformed(f"header length {n} does not fit in the file ({size} bytes)")
        f.seek(8)
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Malformed(f"header JSON malformed: {e}")
    if not isinstance(header, dict):
        raise Malformed("header is not a JSON object")
    return header, size - 8 - n


def check(header, data_size):
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise Malformed("__metadata__ must be an object of strings")
    tensors = []
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(e, dict):
            raise Malformed(f"tensor '{name}': entry is not an object")
        dtype, shape, offsets = e.get("dtype"), e.get("shape"), e.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
            raise Malformed(f"tensor '{name}': bad dtype {dtype!r}")
        if not isinstance(shape, list) or not all(is_int(d) and d >= 0 for d in shape):
            raise Malformed(f"tensor '{name}': bad shape {shape!r}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(is_int(o) and o >= 0 for o in offsets)):
            raise Malformed(f"tensor '{name}': bad data_offsets {offsets!r}")
        begin, end = offsets
        if begin > end or end > data_size:
            raise Malformed(f"tensor '{name}': data_offsets {offsets} outside the data ({data_size} bytes)")
        numel = 1
        for d in shape:
            numel *= d
        if numel * DTYPE_SIZES[dtype] != end - begin:
            raise Malformed(f"tensor '{name}': shape {shape} {dtype} does not match data_offsets {offsets}")
        tensors.append((name, dtype, shape, begin, end))
    spans = sorted((b, e, n) for n, _, _, b, e in tensors if e > b)
    for (b0, e0, n0), (b1, e1, n1) in zip(spans, spans[1:]):
        if b1 < e0:
            raise Malformed(f"tensor '{n1}' overlaps tensor '{n0}'")
    return tensors, metadata


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    path = args[0]
    try:
        header, data_size = read_header(path)
        tensors, metadata = check(header, data_size)
    except OSError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    except Malformed as e:
        print(f"{path}: malformed safetensors file: {e}", file=sys.stderr)
        return 1
    try:
        if "--metadata" in argv:
            for k, v in metadata.items():
                print(f"# {k} = {v}")
        for name, dtype, shape, _, _ in tensors:
            print(f"{name}\t{dtype}\t[{', '.join(str(d) for d in shape)}]")
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into head
        sys.stdout = None
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
