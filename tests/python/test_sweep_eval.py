"""bitsim.sweep and bitsim.eval against `bitsim sweep --json` and `bitsim eval --json` for
the same inputs: the same rows, figures and provenance (bar this host's wall time and memory)."""

import json

import numpy as np
import pytest

import bitsim
from conftest import column

# A point's host-dependent provenance: its wall time and peak memory.
HOST = {"point_wall_s", "peak_rss_mib"}


def test_sweep_gives_the_commands_rows_with_provenance(cli, tmp_path):
    rows = bitsim.sweep(grid={"clock.mhz": [100, 142.86], "attention.variant": ["online-softmax"]},
                        tokens=1, context=8)
    out = tmp_path / "sweep.json"
    cli("sweep", "--grid", "clock.mhz=100,142.86", "--grid", "attention.variant=online-softmax",
        "--tokens", 1, "--context", 8, "--json", out, "--quiet")
    doc = json.loads(out.read_text())
    assert len(rows) == len(doc["points"]) == 2
    assert column(rows, "clock.mhz") == [100.0, 142.86]
    assert rows["clock.mhz"].dtype == np.float64
    assert column(rows, "attention.variant") == ["online-softmax"] * 2
    for name, value in doc["points"][0].items():
        if name in doc["keys"]:
            continue
        if name == "provenance":
            for p in value:
                if p not in HOST:
                    assert column(rows, p) == [pt["provenance"][p] for pt in doc["points"]], p
            continue
        # an empty optional number (JSON null) is NaN in the table (docs/python.md)
        want = [float("nan") if pt[name] is None else pt[name] for pt in doc["points"]]
        got = column(rows, name)
        assert all(g == w or (g != g and w != w) for g, w in zip(got, want)) and len(got) == len(want), name
    for k in ("keys", "context", "tokens", "fidelity", "mode", "evidence", "base_check", "partial", "points_total",
              "skipped"):
        assert rows.attrs[k] == doc[k], k
    assert rows.attrs["partial"] is False
    assert column(rows, "timing")[1] == "fails timing (board)"  # 142.86 MHz with the 23-bit counter


def test_eval_gives_the_commands_rows(cli, source_dir):
    model = source_dir / "models" / "kjv-ternary"
    text = model / "test.txt"
    rows = bitsim.eval(model=model, text=text, tokens=256, board=2, compare=2)
    doc = cli.json("eval", "--model", model, "--text", text, "--tokens", 256, "--board", 2, "--compare", 2,
                   "--json", "--quiet")
    assert len(rows) == len(doc["rows"])
    for name in doc["rows"][0]:
        if name == "buckets":  # the by-context figures are the command's only (bitsim.eval/2)
            continue
        assert column(rows, name) == [r[name] for r in doc["rows"]], name
    compare = rows.attrs["compare"]
    for name in doc["logits_vs_float"][0]:
        assert column(compare, name) == [r[name] for r in doc["logits_vs_float"]], name
    for k in ("model", "model_sha256", "shape", "tokenizer", "text_sha256", "text_tokens", "window", "windows",
              "board_check"):
        assert rows.attrs[k] == doc[k], k
    assert rows.attrs["board_check"]["logits_equal"] is True
    assert set(column(rows, "evidence")) == {"simulated"}


def test_sweep_takes_prompt_tokens_as_the_command(cli, tmp_path):
    rows = bitsim.sweep({"clock.mhz": [100]}, tokens=1, context=8, prompt_tokens=4, check_model=None)
    csv = tmp_path / "s.csv"
    cli("sweep", "--quiet", "--check-model", "", "--tokens", 1, "--context", 8, "--prompt-tokens", 4, "--grid",
        "clock.mhz=100", "--csv", csv)
    line = csv.read_text().splitlines()
    header, values = line[0].split(","), line[1].split(",")
    for name in ("ttft_ms", "prefill_tok_s"):
        assert column(rows, name)[0] == pytest.approx(float(values[header.index(name)]), rel=1e-4), name
    with pytest.raises(bitsim.InputError, match="prompt_tokens"):
        bitsim.sweep({"clock.mhz": [100]}, tokens=1, prompt_tokens=0, check_model=None)


def test_a_sweep_point_that_fails_names_it_and_keeps_the_points_that_ran():
    with pytest.raises(bitsim.InputError, match="point prefill.tokens_per_pass=64") as e:
        bitsim.sweep({"prefill.tokens_per_pass": [1, 64]}, tokens=1, context=460, check_model=None,
                     config={"attention.variant": "online-softmax", "kv.format": "int4"})
    assert "activation slots" in str(e.value)
    assert column(e.value.partial, "prefill.tokens_per_pass") == [1]


def test_eval_takes_window_as_the_command(cli, source_dir):
    model = source_dir / "models" / "kjv-ternary"
    text = model / "test.txt"
    rows = bitsim.eval(model=model, text=text, tokens=64, window=16)
    doc = cli.json("eval", "--model", model, "--text", text, "--tokens", 64, "--window", 16, "--json", "--quiet")
    assert rows.attrs["window"] == doc["window"] == 16
    assert rows.attrs["windows"] == doc["windows"]
    assert column(rows, "ppl") == [r["ppl"] for r in doc["rows"]]
    with pytest.raises(bitsim.InputError, match="window"):
        bitsim.eval(model=model, text=text, tokens=64, window=0)
