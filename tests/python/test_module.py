"""The module itself: its version is the command's, config_keys() is `bitsim config --dump`,
and validate() gives `bitsim validate`'s figures."""

import json
import math
import re
import tomllib

import pytest

import bitsim
from conftest import column


def test_version_is_the_commands(cli):
    assert cli("--version").stdout.strip() == f"bitsim {bitsim.__version__}"


def dumped_keys(text):
    """KEY -> (value, meaning, range text, evidence) from `bitsim config --dump`."""
    values = tomllib.loads(text)
    out, table, comment = {}, "", None
    for line in text.splitlines():
        if m := re.fullmatch(r"\[(.+)\]", line):
            table = m.group(1)
        elif m := re.fullmatch(r"# (.*) \[(?:(.*); )?(board|calibrated|simulated|datasheet|vendor-estimate)\]", line):
            comment = m.groups()
        elif line and not line.startswith("#") and comment:
            leaf = line.split(" = ")[0]
            key = f"{table}.{leaf}" if table else leaf
            node = values
            for part in key.split("."):
                node = node[part]
            out[key] = (node, comment[0], comment[1] or "", comment[2])
            comment = None
    return out


def number(x):
    """A bound as the dump prints it (the shortest text that reads back, no trailing .0)."""
    t = repr(x)
    return t[:-2] if t.endswith(".0") else t


def test_config_keys_are_the_commands_dump(cli):
    keys = bitsim.config_keys()
    dump = dumped_keys(cli("config", "--dump").stdout)
    assert sorted(column(keys, "key")) == sorted(dump)  # the dump groups the keys by TOML table
    for row in zip(*(column(keys, c) for c in ("key", "type", "default", "value", "min", "max", "choices", "unit",
                                                "evidence", "meaning"))):
        key, type_, default, value, lo, hi, choices, unit, evidence, meaning = row
        dumped, dumped_meaning, dumped_range, dumped_evidence = dump[key]
        assert value == dumped and default == dumped, key  # the shipped file is the defaults' dump
        assert evidence == dumped_evidence and meaning == dumped_meaning, key
        assert type(value).__name__ == {"real": "float", "integer": "int", "boolean": "bool", "text": "str"}[type_]
        if choices is not None:
            assert " | ".join(choices) == dumped_range, key
        elif lo is not None:
            assert dumped_range.startswith(f"{number(lo)}..{number(hi)}"), key
        if unit:
            assert dumped_range.endswith(unit), key


def test_config_keys_show_the_configs_values_beside_the_defaults(cli):
    # A config a run takes (INT4 rows are read by the online-softmax unit only).
    keys = bitsim.config_keys(config={"clock.mhz": 100, "kv.format": "int4", "attention.variant": "online-softmax"})
    value = dict(zip(column(keys, "key"), column(keys, "value")))
    default = dict(zip(column(keys, "key"), column(keys, "default")))
    assert value["clock.mhz"] == 100.0 and default["clock.mhz"] == 125.0
    assert value["kv.format"] == "int4"
    changed = cli("config", "--set", "clock.mhz=100", "--set", "kv.format=int4",
                  "--set", "attention.variant=online-softmax").stdout.split("\n")
    assert sorted(k for k in value if value[k] != default[k]) == sorted(ln.split(" = ")[0] for ln in changed if ln)


def test_validate_gives_the_commands_figures(source_dir):
    # The figures `bitsim regress` checks exactly (configs/regress/validate.json, the rows of
    # `bitsim validate` for the shipped board): the same validate() as the command's, so the
    # test runs it once, not twice.
    base = json.loads((source_dir / "configs" / "regress" / "validate.json").read_text())
    want = {k: float(v) for k, v in base["figures"] if k.endswith("(c)")}
    rows = bitsim.validate(python=False)
    got = {f"{s} T={t} {f} ({d})": v for s, t, f, d, v in
           zip(*(column(rows, c) for c in ("scenario", "context", "figure", "driver", "simulated")))}
    assert got == want
    board = column(rows, "board")
    with_board = [not math.isnan(b) for b in board]
    assert sum(with_board) == 12  # BOARD.md's figures (`bitsim validate`: "12 board figures")
    assert column(rows, "evidence") == ["simulated vs board" if b else "simulated (prediction)" for b in with_board]
    for b, sim, err in zip(board, column(rows, "simulated"), column(rows, "error_pct")):
        if not math.isnan(b):
            assert err == pytest.approx((sim - b) / b * 100)
