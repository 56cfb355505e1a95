"""bitsim.run against `bitsim run` for the same inputs: the same per-token figures, summary,
text and config; the exact picoseconds and logits digests of the regress baseline; the
logits as arrays; the mismatch exception; no growth over 100 calls."""

import gc
import json
import math
import os

import numpy as np
import pytest

import bitsim
from conftest import column, fnv1a64

TINY = dict(model="synthetic:tiny", prompt="Hi", tokens=4)

# Host wall times and what the start-up cache did differ from run to run, nothing else.
HOST = {"wall_s", "first_token_s", "load_s", "calibration_s", "sim_tok_per_wall_s", "model_cached",
        "scales_cached", "timing_cache"}


def test_run_gives_the_commands_tokens_summary_text_and_config(cli):
    r = bitsim.run(**TINY, config={"clock.mhz": 100, "attention.variant": "online-softmax"})
    doc = cli.json("run", "--json", "--quiet", "--model", "synthetic:tiny", "--prompt", "Hi", "--tokens", 4,
                   "--set", "clock.mhz=100", "--set", "attention.variant=online-softmax")
    assert r.text == doc["text"]
    assert r.model == doc["model"] and r.tokenizer == doc["tokenizer"] and r.fidelity == doc["fidelity"]
    assert r.prompt_tokens == doc["prompt_tokens"]
    assert r.config == doc["config"]
    assert len(r.tokens) == len(doc["tokens"]) == doc["prompt_tokens"] + 4
    for name in doc["tokens"][0]:
        if name == "wall_ms":
            continue
        assert column(r.tokens, name) == [t[name] for t in doc["tokens"]], name
    for name, value in doc["summary"].items():
        if name not in HOST:
            assert r.summary[name] == value, name
    assert r.summary["timing_cache"]["batches"] == doc["summary"]["timing_cache"]["batches"]
    assert r.summary["evidence"]["tok_s"] == "simulated"
    assert r.summary["evidence"]["wall_s"].startswith("host")
    assert r.summary["logits_equal"] is True


def test_tpot_is_none_when_nothing_was_decoded():
    """The command's null: no decoded token, no time per output token (not 0.0)."""
    assert bitsim.run(**{**TINY, "tokens": 0}).summary["tpot_ms"] is None
    assert bitsim.run(**{**TINY, "tokens": 1}).summary["tpot_ms"] > 0


def test_run_gives_the_regress_baselines_picoseconds_and_logits_digests(source_dir):
    # configs/regress.toml, scenario tiny-fast: the figures `bitsim regress` checks exactly.
    base = json.loads((source_dir / "configs" / "regress" / "tiny-fast.json").read_text())
    fig = dict((k, v) for k, v in base["figures"])
    r = bitsim.run(model="synthetic:tiny", prompt="The capital of France is", tokens=12)
    assert r.prompt_tokens == fig["prompt_tokens"]
    assert len(r.tokens) == r.prompt_tokens + 12
    ids, mm, at, cpu, digest = (column(r.tokens, c) for c in ("token_id", "matmul_ps", "attention_ps", "cpu_ps",
                                                              "logits_digest"))
    for i in range(len(r.tokens)):
        assert ids[i] == fig[f"token {i} id"]
        assert mm[i] == fig[f"token {i} matmul_ps"]
        assert at[i] == fig[f"token {i} attention_ps"]
        assert cpu[i] == fig[f"token {i} cpu_ps"]
        assert digest[i] == fig[f"token {i} logits"]
    generated = [ids[i] for i in range(len(ids)) if column(r.tokens, "generated")[i]]
    assert " ".join(map(str, generated)) == fig["generated ids"]


def test_logits_are_float32_arrays_whose_digests_are_the_tokens():
    r = bitsim.run(**TINY, logits=True)
    assert len(r.logits) == len(r.tokens)
    digests = column(r.tokens, "logits_digest")
    for a, d in zip(r.logits, digests):
        assert isinstance(a, np.ndarray) and a.dtype == np.float32 and a.ndim == 1
        assert not a.flags.owndata  # the vector the board filled, handed over, not a copy
        assert f"{fnv1a64(a.tobytes()):016x}" == d
    assert bitsim.run(**TINY).logits is None


def test_every_per_token_array_has_one_entry_per_token_none_where_no_logits():
    """A prefill of P tokens without all_logits computes logits at the chunk's last position
    only: logits holds None at the others, and every table column is as long as r.tokens."""
    r = bitsim.run(model="synthetic:tiny", prompt="Hello there", tokens=2, logits=True,
                   config={"prefill.tokens_per_pass": 4})
    n = len(r.tokens)
    assert n == r.prompt_tokens + 2
    assert len(r.logits) == n
    for name in r.tokens:  # a DataFrame's or a dict's column names
        assert len(column(r.tokens, name)) == n, name
    digests = column(r.tokens, "logits_digest")
    missing = [i for i, a in enumerate(r.logits) if a is None]
    assert missing, "a prefill without all_logits leaves prompt positions without logits"
    for i, a in enumerate(r.logits):
        if a is None:
            assert digests[i] in (None, "") or (isinstance(digests[i], float) and math.isnan(digests[i])), i
        else:
            assert f"{fnv1a64(a.tobytes()):016x}" == digests[i], i


def test_timing_only_and_cycle_fidelity_give_the_fast_fidelitys_times():
    fast = bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=1)
    cycle = bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=1, fidelity="cycle")
    timing = bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=1, timing_only=True)
    assert cycle.fidelity == "cycle" and timing.fidelity == "timing-only"
    for c in ("matmul_ps", "attention_ps", "cpu_ps"):
        assert column(fast.tokens, c) == column(cycle.tokens, c) == column(timing.tokens, c)
    assert column(timing.tokens, "logits_equal") == [None] * len(timing.tokens)
    assert timing.summary["logits_equal"] is None


def test_a_logits_mismatch_raises_with_where_the_board_diverged():
    # The test hook flips the low bit of lane 0's first lm_head byte before step 0
    # (tests/sim/board_run_test.cpp, CorruptedWeightByteIsCaughtAndLocated).
    args = bitsim._run_args(model="synthetic:tiny", prompt="Hi", tokens=2)
    args["test_poke_lm_head_step"] = 0
    with pytest.raises(bitsim.LogitsMismatch) as e:
        bitsim._run_call(args)
    assert "step lm_head_acc, element 0:" in e.value.where
    assert not isinstance(e.value, ValueError)
    assert len(e.value.result.tokens) == 1
    assert column(e.value.result.tokens, "logits_equal") == [False]
    assert e.value.result.summary["mismatch"] == e.value.where


def test_tables_without_pandas_are_dicts_of_numpy_arrays(monkeypatch):
    monkeypatch.setattr(bitsim, "table_type", "numpy")
    r = bitsim.run(**TINY)
    assert isinstance(r.tokens, bitsim.Columns) and isinstance(r.tokens, dict)
    assert r.tokens["total_ms"].dtype == np.float64
    assert r.tokens["bytes_read"].dtype == np.uint64
    assert r.tokens["text"].dtype == object
    assert len(r.tokens) == r.prompt_tokens + 4
    assert r.tokens.attrs["evidence"] == "simulated"


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_100_calls_grow_neither_objects_nor_memory():
    def call():
        r = bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=1, logits=True)
        return len(r.tokens)

    for _ in range(10):  # warm: caches, the allocator's pools
        call()
    gc.collect()
    objects, rss = len(gc.get_objects()), rss_kib()
    for _ in range(100):
        call()
    gc.collect()
    assert len(gc.get_objects()) - objects < 50
    assert rss_kib() - rss < 8 * 1024, "resident memory grew by more than 8 MiB over 100 runs"
