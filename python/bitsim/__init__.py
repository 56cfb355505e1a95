"""bitsim from Python: the simulator's runs, sweeps, evals and validation as tables.

Every function calls the same C++ entry point as the bitsim command (docs/python.md):

    import bitsim
    r = bitsim.run(model="synthetic:tiny", prompt="The capital of France is", tokens=8,
                   config={"clock.mhz": 142.86})
    r.tokens          # the per-token table (pandas DataFrame, else a dict of numpy arrays)
    r.summary         # bitsim.run/1's summary, with r.summary["evidence"] labelling each figure
    r.text            # the generated text
    bitsim.sweep(grid={"clock.mhz": [100, 125, 150]})   # one row per point, with provenance
    bitsim.eval(model="models/kjv-ternary", text="models/kjv-ternary/test.txt", tokens=512)
    bitsim.validate()         # the simulator against the board's figures
    bitsim.config_keys()      # every config key: default, range, unit, evidence, meaning

Bad input raises InputError (a ValueError) with the message the bitsim command prints; an
unknown keyword or a value of the wrong Python type raises InputTypeError (an InputError
and a TypeError); a logits mismatch raises LogitsMismatch; Ctrl-C (SIGINT) stops a call at
its next step and raises Stopped (a KeyboardInterrupt) holding what finished.
"""

import difflib
import functools
import inspect
import math
import numbers
import os
import signal
import threading
import warnings
from collections.abc import Mapping

import numpy as np

from . import _bitsim

__version__ = _bitsim.__version__
git_commit = _bitsim.git_commit

__all__ = [
    "run", "sweep", "eval", "validate", "config_keys", "RunResult", "Columns",
    "InputError", "InputTypeError", "LogitsMismatch", "Stopped", "BitsimWarning", "__version__",
]

# "auto": a pandas DataFrame when pandas is installed, else Columns (a dict of numpy
# arrays); "numpy": always Columns; "pandas": always a DataFrame.
table_type = os.environ.get("BITSIM_TABLES", "auto")


# ---------------------------------------------------------------------------------------
# Exceptions


InputError = _bitsim.InputError
InputError.__doc__ = ("Bad input: a key, file, option or value bitsim refuses. The message names it, "
                      "as the bitsim command prints it (exit code 2 there).")
InputError.__module__ = __name__


class InputTypeError(InputError, TypeError):
    """An unknown keyword argument, or an argument or config value of the wrong Python type."""


class LogitsMismatch(Exception):
    """The board's logits differed from the golden reference's (exit code 3 of bitsim run).

    `where` says where the two first diverge (token, layer, step, element); `result` is the
    run up to and including the token that differed."""

    def __init__(self, where, result=None):
        super().__init__(f"logits mismatch: {where}")
        self.where = where
        self.result = result


Stopped = _bitsim.Stopped
Stopped.__doc__ = ("A call stopped by Ctrl-C (SIGINT), as the bitsim command stops (exit code 130). A "
                   "KeyboardInterrupt; `partial` holds what finished (the tokens run, the sweep points "
                   "done) where the call has such, `signal` the signal.")
Stopped.__module__ = __name__


class BitsimWarning(UserWarning):
    """A warning bitsim printed on stderr in the command (e.g. an unusable start-up cache)."""


def _stopped(message, signum, partial):
    e = Stopped(message)
    e.partial = partial
    e.signal = signum
    return e


# ---------------------------------------------------------------------------------------
# Argument checks


def _keywords(fn):
    """Unknown keywords and surplus positional arguments raise InputTypeError naming them."""
    sig = inspect.signature(fn)
    names = [p.name for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        for k in kwargs:
            if k not in names:
                near = difflib.get_close_matches(k, names, n=1)
                hint = f" (did you mean '{near[0]}'?)" if near else f" (it takes {', '.join(names)})"
                raise InputTypeError(f"{fn.__name__}: unknown keyword argument '{k}'{hint}")
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise InputTypeError(f"{fn.__name__}: {e}") from None
        return fn(*args, **kwargs)

    return wrapper


def _type_name(v):
    return type(v).__name__


def _int(name, v, minimum=None, maximum=2**63 - 1):
    """An int argument; the binding takes 64-bit integers, so a Python int past them is
    refused here naming the argument (the binding's own cast error would name nothing)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise InputTypeError(f"{name}: expected an int, got {_type_name(v)} {v!r}")
    v = int(v)
    if minimum is not None and v < minimum:
        raise InputError(f"{name} {v}: must be {minimum} or more")
    if v > maximum or v < -2**63:
        raise InputError(f"{name} {v}: out of range (at most {maximum})" if v > maximum
                         else f"{name} {v}: out of range (a 64-bit integer)")
    return v


def _real(name, v):
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise InputTypeError(f"{name}: expected a number, got {_type_name(v)} {v!r}")
    return float(v)


def _flag(name, v):
    if not isinstance(v, (bool, np.bool_)):
        raise InputTypeError(f"{name}: expected True or False, got {_type_name(v)} {v!r}")
    return bool(v)


def _encodable(name, v):
    """v, which the binding passes on as UTF-8: a str holding a lone surrogate cannot be."""
    try:
        v.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(f"{name}: {v[e.start]!r} at index {e.start} is a lone surrogate, not a character "
                         "(text must be encodable as UTF-8)") from None
    return v


def _text(name, v, optional=False):
    if v is None and optional:
        return ""
    if not isinstance(v, str):
        raise InputTypeError(f"{name}: expected a str, got {_type_name(v)} {v!r}")
    return _encodable(name, v)


def _path(name, v, optional=True):
    if v is None and optional:
        return ""
    if not isinstance(v, (str, os.PathLike)):
        raise InputTypeError(f"{name}: expected a path (str or os.PathLike), got {_type_name(v)} {v!r}")
    path = os.fspath(v)
    if isinstance(path, bytes):
        raise InputTypeError(f"{name}: expected a str path, got bytes {path!r}")
    _encodable(name, path)
    if not path:
        raise InputError(f"{name}: the file name is empty (give None for none)")
    if "\0" in path:
        raise InputError(f"{name}: the path {path!r} holds a NUL character (no file name can)")
    return path


def _value_text(where, v):
    """A config value as the text `--set KEY=VALUE` would give (the key's type is checked there)."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, str):
        return _encodable(where, v)
    raise InputTypeError(f"{where}: a {_type_name(v)} is not a config value (give an int, float, bool or str)")


def _sets(config):
    """The config mapping as "KEY=VALUE" assignments, in order."""
    if config is None:
        return []
    if not isinstance(config, Mapping):
        raise InputTypeError(f"config: expected a dict of KEY: value, got {_type_name(config)}")
    out = []
    for k, v in config.items():
        if not isinstance(k, str):
            raise InputTypeError(f"config: the key {k!r} is not a str (config keys are like 'clock.mhz')")
        _encodable(f"config key {k!r}", k)
        out.append(f"{k}={_value_text(f'config[{k!r}]', v)}")
    return out


def _interruptible():
    """Ctrl-C can stop the call: it runs on the main thread with Python's own SIGINT handler."""
    return (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)


def _warn(messages):
    for m in messages:
        warnings.warn(m, BitsimWarning, stacklevel=3)


# ---------------------------------------------------------------------------------------
# Tables


class Columns(dict):
    """A table as a dict of column name -> numpy array (texts and optional flags as object
    arrays), with `attrs` as a DataFrame has (what the table's document says beside its rows)."""

    def __init__(self, columns=(), attrs=None):
        super().__init__(columns)
        self.attrs = dict(attrs or {})

    def __len__(self):  # rows, as len(DataFrame)
        return len(next(iter(self.values()))) if dict.__len__(self) else 0

    @property
    def columns(self):
        return list(self.keys())

    def __repr__(self):
        return f"Columns({len(self)} rows: {', '.join(self.keys())})"


def _use_pandas():
    if table_type == "numpy":
        return None
    try:
        import pandas
        return pandas
    except ImportError:
        if table_type == "pandas":
            raise
        return None


def _table(cols, attrs=None):
    pd = _use_pandas()
    if pd is not None:
        df = pd.DataFrame({k: (v if isinstance(v, np.ndarray) else pd.Series(v, dtype=object)) for k, v in cols.items()})
        df.attrs.update(attrs or {})
        return df
    out = {}
    for k, v in cols.items():
        if isinstance(v, np.ndarray):
            out[k] = v
        else:
            a = np.empty(len(v), dtype=object)
            a[:] = v
            out[k] = a
    return Columns(out, attrs)


# ---------------------------------------------------------------------------------------
# run

# The summary's figures that are this host's wall time or the start-up cache's doing, not the
# simulated board's: every other figure of a run is `simulated`.
_HOST_FIGURES = {"wall_s", "first_token_s", "load_s", "calibration_s", "sim_tok_per_wall_s", "model_cached",
                 "scales_cached", "timing_cache"}


def _summary_evidence(summary):
    ev = {}
    for k in summary:
        ev[k] = "host (this machine, not a board figure)" if k in _HOST_FIGURES else "simulated"
    return ev


class RunResult:
    """A run through the simulated board (`bitsim run`).

    tokens   the per-token table: bitsim.run/1's token fields (docs/json-schemas.md; among
             them logits_digest, FNV-1a 64 of the logits' bytes in 16 hex digits, as
             `bitsim regress` compares), then matmul_ps, attention_ps, cpu_ps, walker_ps
             (exact simulated picoseconds)
    summary  bitsim.run/1's summary (tok_s, median_total_ms, ...) with "evidence": a label
             for each figure (simulated, or host wall time)
    text     the generated text
    logits   with logits=True: one entry per row of `tokens`, a float32 array, or None for a
             prompt position whose logits were not computed (None without logits=True)
    """

    evidence = "simulated"

    def __init__(self, d):
        self.model = d["model"]
        self.tokenizer = d["tokenizer"]
        self.shape = d["shape"]
        self.fidelity = d["fidelity"]
        self.prompt_tokens = d["prompt_tokens"]
        self.text = d["text"]
        self.config = d["config"]
        self.summary = d["summary"]
        self.summary["evidence"] = _summary_evidence(d["summary"])
        self.tokens = _table(d["tokens"], {"evidence": "simulated", "model": self.model, "fidelity": self.fidelity})
        self.logits = d["logits"]
        self.mismatch = d["mismatch"] or None
        self.stopped = bool(d["stopped"])
        self.warnings = d["warnings"]

    def __repr__(self):
        s = self.summary
        return (f"<bitsim.RunResult {self.model}, {self.fidelity}: {s.get('tokens', 0)} tokens, "
                f"{s.get('tok_s', 0.0):.2f} tok/s [simulated]{', stopped' if self.stopped else ''}>")


@_keywords
def run(*, prompt, model="synthetic:bitnet-large", tokens=16, fidelity="fast", config=None, config_file=None,
        check=True, timing_only=False, logits=False, tokenizer=None, seed=0, temperature=0.0, top_k=0, threads=2,
        stop_at_capacity=False, legacy_attention=False, cache=True, cache_dir=None, trace=None, layers_csv=None,
        record_mmio=None, dram_trace=None, dram_commands=None):
    """A prompt token by token on the simulated board, each token's logits checked against the
    golden reference (`bitsim run`). Returns a RunResult.

    model        synthetic:SHAPE[:SEED] or a checkpoint folder (--model)
    prompt       the prompt text; tokens: tokens to generate (--tokens)
    fidelity     "fast" (default) or "cycle"; timing_only: skip the arithmetic (fast only)
    config       {KEY: value} over the board config, as --set KEY=VALUE (see config_keys())
    config_file  a board config TOML instead of configs/pynq-z2.toml (--config)
    check        compare every token's logits with the golden reference (--no-check: False)
    logits       keep each token's logits as a float32 numpy array in result.logits
    seed, temperature, top_k, threads, stop_at_capacity, legacy_attention, tokenizer,
    trace, layers_csv, record_mmio   as the command's options of the same names
    dram_trace, dram_commands   cycle fidelity: --dram-trace and --dram-commands (every request
                 the memory accepts; under ddr.model = ddr3 every DRAM command), with the
                 command's checks: refused before the run if a path names an input or another
                 output, written whole (a temporary file renamed) or marked partial on Ctrl-C
    cache, cache_dir   the start-up cache (on by default, as in the command; docs/cache.md)

    Raises InputError on bad input, LogitsMismatch when a token's logits differ (its
    `result` holds the run), Stopped on Ctrl-C (its `partial` holds the tokens that ran).
    """
    return _run_call(_run_args(**locals()))


def _run_args(**kw):
    """run()'s arguments (run's defaults for those not given), checked, as the C++ half takes them."""
    kw = {**{k: p.default for k, p in inspect.signature(run).parameters.items()
             if p.default is not inspect.Parameter.empty}, **kw}
    flags = ("check", "timing_only", "logits", "stop_at_capacity", "legacy_attention", "cache")
    paths = ("config_file", "tokenizer", "cache_dir", "trace", "layers_csv", "record_mmio", "dram_trace",
             "dram_commands")
    args = {k: _flag(k, kw[k]) for k in flags}
    args.update({k: _path(k, kw[k]) for k in paths})
    args.update({
        "model": _path("model", kw["model"], optional=False),
        "prompt": _text("prompt", kw["prompt"]),
        "tokens": _int("tokens", kw["tokens"]),
        "fidelity": _text("fidelity", kw["fidelity"]),
        "sets": _sets(kw["config"]),
        "seed": _int("seed", kw["seed"], minimum=0, maximum=2**64 - 1),
        "temperature": _real("temperature", kw["temperature"]),
        "top_k": _int("top_k", kw["top_k"]),
        "threads": _int("threads", kw["threads"]),
        "interruptible": _interruptible(),
    })
    return args


def _run_call(args):
    """The run, its warnings, and its result or exception."""
    d = _bitsim.run(args)
    _warn(d["warnings"])
    result = RunResult(d)
    if result.stopped:
        raise _stopped(d["stop_message"] or "stopped by SIGINT", d["stopped"], result)
    if result.mismatch and d["checked"]:
        raise LogitsMismatch(result.mismatch, result)
    return result


# ---------------------------------------------------------------------------------------
# sweep


def _axes(grid):
    if not isinstance(grid, Mapping):
        raise InputTypeError(f"grid: expected a dict of KEY: [values], got {_type_name(grid)}")
    axes = []
    for k, values in grid.items():
        if not isinstance(k, str):
            raise InputTypeError(f"grid: the key {k!r} is not a str (config keys are like 'clock.mhz')")
        _encodable(f"grid key {k!r}", k)
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise InputTypeError(f"grid[{k!r}]: expected a list of values, got {_type_name(values)} {values!r}")
        texts = [_value_text(f"grid[{k!r}]", v) for v in values]
        if not texts:
            raise InputError(f"grid[{k!r}]: the list of values is empty (give one value or more)")
        for t in texts:
            if "," in t or not t:
                raise InputError(f"grid[{k!r}]: the value {t!r} is empty or holds a comma")
        axes.append(f"{k}={','.join(texts)}")
    return axes


@_keywords
def sweep(grid, *, tokens=4, context=64, jobs=1, check_model="synthetic:tiny", config=None, config_file=None,
          prompt_tokens=None):
    """A grid over board config keys (`bitsim sweep`): every point timing-only on the
    bitnet-large shape at context T = `context`, `tokens` tokens each, after one functional
    check of the base config on `check_model` (None: skip). Returns one row per point: the
    swept keys (in their types), the figures and the provenance columns, as the CSV has
    them; `attrs` holds the rest of bitsim.sweep/1 (keys, base_check, skipped, wall_s, ...).

    grid    {KEY: [v1, v2, ...]}; the grid is the product of the axes, the last fastest
    config  {KEY: value} over the base config (--set); config_file: --config
    jobs    worker processes (--jobs)
    prompt_tokens  also time a prompt of N tokens per point (--prompt-tokens): ttft_ms,
            prefill_tok_s, prompt_j (None: not timed)

    Ctrl-C raises Stopped whose `partial` holds the rows of the points done. A point that
    fails when measured (its KV cache cannot hold the context, ...) raises InputError naming
    it; its `partial` holds the rows of the points that ran (attrs["partial"] True).
    """
    axes = _axes(grid)
    d = _bitsim.sweep(axes, _int("tokens", tokens), _int("context", context), _int("jobs", jobs),
                      _text("check_model", check_model, optional=True), _path("config_file", config_file),
                      _sets(config), _interruptible(),
                      0 if prompt_tokens is None else _int("prompt_tokens", prompt_tokens, minimum=1))
    rows = _table(d["rows"], d["attrs"])
    if d["failed"] and not d["stopped"]:
        a = d["attrs"]
        err = InputError(f"sweep: {len(d['failed'])} of {a['points_total']} points failed: "
                         + "; ".join(f"point {f}" for f in d["failed"]))
        err.partial = rows
        raise err
    if d["stopped"]:
        a = d["attrs"]
        raise _stopped(f"sweep stopped by SIGINT: {len(rows)} of {a['points_total']} points done", d["stopped"], rows)
    return rows


# ---------------------------------------------------------------------------------------
# eval, validate, config keys


@_keywords
def eval(model, text, *, tokens=None, board=None, compare=None, tokenizer=None, threads=2, config=None,
         config_file=None, cache=True, cache_dir=None, window=None):
    """Perplexity of a text under the float model, the board's arithmetic and its variants
    (`bitsim eval`). Returns one row per arithmetic (arithmetic, evidence, ppl, tokens,
    nll_mean); `attrs` holds the rest of bitsim.eval/1 (model, text and their
    hashes, windows, board_check) and attrs["compare"] the logit comparison's table.

    tokens   score the first N tokens of the text (default: all)
    board    also run the first N positions on the simulated board (--board)
    compare  compare the board rows' logits with the float reference over N positions
    window   positions per window (--window; default min(512, max_position_embeddings))
    """
    def count(name, v):
        return 0 if v is None else _int(name, v, minimum=1)

    d = _bitsim.eval(_path("model", model, optional=False), _path("text", text, optional=False),
                     count("tokens", tokens), count("board", board), count("compare", compare),
                     _path("tokenizer", tokenizer), _int("threads", threads), _path("config_file", config_file),
                     _sets(config), _flag("cache", cache), _path("cache_dir", cache_dir), _interruptible(),
                     count("window", window))
    _warn(d["warnings"])
    attrs = dict(d["attrs"])
    compare = d["compare"]
    compare["evidence"] = ["simulated"] * len(compare["arithmetic"])  # as bitsim.eval/1's logits_vs_float
    attrs["compare"] = _table(compare, {"evidence": "simulated"})
    return _table(d["rows"], attrs)


@_keywords
def validate(*, config=None, config_file=None, python=True):
    """The simulator against every board figure of BOARD.md (`bitsim validate`): one row per
    figure (scenario, context, figure, simulated, board, error_pct, driver, evidence).
    python=False leaves out the python-driver prediction rows (--no-python)."""
    cols = _bitsim.validate(_path("config_file", config_file), _sets(config), _flag("python", python),
                            _interruptible())
    board = cols["board"]
    cols["evidence"] = ["simulated (prediction)" if math.isnan(b) else "simulated vs board" for b in board]
    return _table(cols, {"schema": "bitsim.validate/1"})


@_keywords
def config_keys(*, config=None, config_file=None):
    """Every board config key (`bitsim config --dump`): key, type, default (the shipped board),
    value (with `config` / `config_file` applied), min, max (None where unbounded), choices,
    unit, evidence (board | calibrated | simulated) and meaning."""
    return _table(_bitsim.config_keys(_path("config_file", config_file), _sets(config)))
