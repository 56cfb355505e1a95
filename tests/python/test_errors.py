"""Bad input through the Python module: an exception that names the keyword, key, file or
value, with the bitsim command's message where the command refuses the same input (the
command's `--set KEY` is the module's `config KEY`); never a crash of the interpreter."""

import os

import pytest

import bitsim

TINY = dict(model="synthetic:tiny", prompt="Hi", tokens=1)
CLI_TINY = ("run", "--quiet", "--model", "synthetic:tiny", "--prompt", "Hi", "--tokens", "1")


def refused(call, *args, **kwargs):
    with pytest.raises(bitsim.InputError) as e:
        call(*args, **kwargs)
    assert isinstance(e.value, ValueError)
    return str(e.value)


def test_unknown_keyword_arguments_are_named_with_the_nearest_one():
    for call, kwargs, bad, near in [
        (bitsim.run, dict(TINY, tokns=3), "tokns", "tokens"),
        (bitsim.sweep, dict(grid={"clock.mhz": [100]}, contxt=8), "contxt", "context"),
        (bitsim.eval, dict(model="synthetic:tiny", text="x", bord=1), "bord", "board"),
        (bitsim.validate, dict(pyhton=False), "pyhton", "python"),
        (bitsim.config_keys, dict(conf={}), "conf", "config"),
    ]:
        with pytest.raises(bitsim.InputTypeError) as e:
            call(**kwargs)
        assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)
        assert f"'{bad}'" in str(e.value) and f"'{near}'" in str(e.value), str(e.value)
    with pytest.raises(bitsim.InputTypeError, match="prompt"):
        bitsim.run(model="synthetic:tiny")  # the prompt is required, as --prompt is


@pytest.mark.parametrize("value", [[100], {"a": 1}, None, b"100", object()])
def test_config_values_of_a_wrong_python_type_name_the_key(value):
    with pytest.raises(bitsim.InputTypeError) as e:
        bitsim.run(**TINY, config={"clock.mhz": value})
    assert "config['clock.mhz']" in str(e.value)
    assert type(value).__name__ in str(e.value)


def test_arguments_of_a_wrong_python_type_name_the_argument():
    for kwargs, name in [(dict(TINY, tokens="4"), "tokens"), (dict(TINY, prompt=5), "prompt"),
                         (dict(TINY, check="yes"), "check"), (dict(TINY, config=[("clock.mhz", 100)]), "config"),
                         (dict(TINY, model=None), "model"), (dict(TINY, tokens=True), "tokens")]:
        with pytest.raises(bitsim.InputTypeError, match=name):
            bitsim.run(**kwargs)
    with pytest.raises(bitsim.InputTypeError, match="grid"):
        bitsim.sweep(grid=["clock.mhz=100"])
    with pytest.raises(bitsim.InputTypeError, match="clock.mhz"):
        bitsim.sweep(grid={"clock.mhz": 100})


@pytest.mark.parametrize("key, value, cli_value", [
    ("clock.mhz", "fast", "fast"),            # not a number
    ("clock.mhz", 10000.0, "10000.0"),        # out of range
    ("clock.mhz", float("nan"), "nan"),       # not finite
    ("dma.length_bits", 23.5, "23.5"),        # not an integer
    ("attention.variant", "fastest", "fastest"),  # not one of the choices
    ("clock.mhzz", 100, "100"),               # no such key
])
def test_refused_config_values_give_the_commands_message(cli, key, value, cli_value):
    msg = refused(bitsim.run, **TINY, config={key: value})
    cli_msg = cli.error(*CLI_TINY, "--set", f"{key}={cli_value}")
    assert cli_msg.startswith("--set")
    assert msg == "config" + cli_msg[len("--set"):]
    assert key in msg


def test_a_model_path_that_does_not_exist_gives_the_commands_message(cli, tmp_path):
    missing = tmp_path / "no-such-model"
    msg = refused(bitsim.run, model=missing, prompt="Hi", tokens=1)
    assert msg == cli.error("run", "--model", missing, "--prompt", "Hi")
    assert str(missing) in msg
    assert refused(bitsim.eval, model=missing, text=__file__) == cli.error("eval", "--model", missing,
                                                                          "--text", __file__)


def test_a_config_file_that_does_not_exist_gives_the_commands_message(cli, tmp_path):
    missing = tmp_path / "no-such.toml"
    msg = refused(bitsim.run, **TINY, config_file=missing)
    assert msg == cli.error(*CLI_TINY, "--config", missing)
    assert str(missing) in msg
    assert refused(bitsim.config_keys, config_file=missing) == msg


def test_a_text_file_that_does_not_exist_gives_the_commands_message(cli, tmp_path):
    missing = tmp_path / "no-such.txt"
    msg = refused(bitsim.eval, model="synthetic:tiny", text=missing)
    assert msg == cli.error("eval", "--model", "synthetic:tiny", "--text", missing)


def test_a_grid_with_an_empty_list_or_no_axis_is_refused(cli):
    msg = refused(bitsim.sweep, grid={"clock.mhz": []})
    assert "grid['clock.mhz']" in msg and "empty" in msg
    msg = refused(bitsim.sweep, grid={})
    assert "grid is empty" in msg
    msg = refused(bitsim.sweep, grid={"clock.mhz": [100, "fast"]}, check_model=None)
    assert msg == "grid" + cli.error("sweep", "--grid", "clock.mhz=100,fast")[len("--grid"):]
    assert "two axes" in refused(bitsim.sweep, grid={"clock.mhz": [100], "clock_mhz": [125]})


def test_other_refusals_name_the_argument():
    assert "fidelity 'slow'" in refused(bitsim.run, **TINY, fidelity="slow")
    assert "tokens" in refused(bitsim.run, **dict(TINY, tokens=-1))
    assert "timing_only" in refused(bitsim.run, **TINY, fidelity="cycle", timing_only=True)
    assert "prompt" in refused(bitsim.run, model="synthetic:tiny", prompt="", tokens=1)
    assert "tokens 0: must be 1 or more" == refused(bitsim.eval, model="synthetic:tiny", text=__file__, tokens=0)
    assert "context" in refused(bitsim.sweep, grid={"clock.mhz": [100]}, context=0)
    assert "trace: the file name is empty" in refused(bitsim.run, **TINY, trace="")  # None: no trace
    assert "legacy_attention" in refused(bitsim.run, **TINY, legacy_attention=True,
                                         config={"attention.variant": "online-softmax"})


def test_no_output_replaces_an_input_by_path_symlink_or_hard_link(tmp_path):
    """run()'s output arguments, each given the board config it reads (as `bitsim run`)."""
    config = tmp_path / "board.toml"
    text = "# the user's board\n[clock]\nmhz = 125\n"
    config.write_text(text)
    link, hard = tmp_path / "link", tmp_path / "hard"
    link.symlink_to(config)
    os.link(config, hard)
    for arg in ("trace", "layers_csv", "record_mmio", "dram_trace", "dram_commands"):
        for out in (config, tmp_path / "." / "board.toml", link, hard):
            # traced in the cycle fidelity (the DRAM commands under ddr3)
            cycle = {"fidelity": "cycle", "config": {"ddr.model": "ddr3"}} if arg.startswith("dram") else {}
            message = refused(bitsim.run, **TINY, **cycle, config_file=str(config), **{arg: str(out)})
            assert str(out) in message and str(config) in message and "must not replace" in message, message
    assert config.read_text() == text


@pytest.mark.parametrize("key, value, spelled, accepted", [
    ("prefill.all_logits", True, "true", True), ("prefill.all_logits", False, "false", True),
    ("prefill.all_logits", 1, "1", True), ("prefill.all_logits", 0, "0", True),
    ("prefill.all_logits", 2, "2", False), ("prefill.all_logits", 1.0, "1.0", False),
    ("dma.max_burst_beats", 16, "16", True), ("dma.max_burst_beats", 16.0, "16.0", False),
    ("dma.max_burst_beats", True, "true", False), ("clock.mhz", 100, "100", True),
    ("clock.mhz", 100.5, "100.5", True),
])
def test_a_value_is_accepted_or_refused_as_set_and_toml_take_its_spelling(cli, tmp_path, key, value, spelled,
                                                                           accepted):
    """config={KEY: value} as `--set KEY=TEXT` and a TOML file `KEY = TEXT` (docs/errors.md)."""
    table, leaf = key.split(".", 1)
    toml = tmp_path / "c.toml"
    toml.write_text(f"[{table}]\n{leaf} = {spelled}\n")
    by_set = cli("config", "--set", f"{key}={spelled}", check=False)
    by_toml = cli("config", "--config", str(toml), check=False)
    assert (by_set.returncode == 0) == accepted and (by_toml.returncode == 0) == accepted, (by_set, by_toml)
    if accepted:
        bitsim.config_keys(config={key: value})  # raises if refused
        assert by_set.stdout == by_toml.stdout  # the same value, whichever spelling gave it
    else:
        assert key in refused(bitsim.config_keys, config={key: value})


def test_the_interpreter_goes_on_after_every_refusal():
    for _ in range(3):
        with pytest.raises(bitsim.InputError):
            bitsim.run(**TINY, config={"clock.mhz": -1})
    assert len(bitsim.run(**TINY).tokens) == 4  # BOS, "H", "i", one generated


def test_text_the_binding_cannot_convert_is_refused_naming_the_argument():
    """A str holding a lone surrogate (not UTF-8 text) in any text, path, config key or value
    the module passes to the binding: InputError naming the argument, never the binding's own
    unnamed RuntimeError."""
    bad = "a\ud800b"
    cases = [
        (bitsim.run, dict(TINY, prompt=bad), "prompt"),
        (bitsim.run, dict(TINY, model=bad), "model"),
        (bitsim.run, dict(TINY, fidelity=bad), "fidelity"),
        (bitsim.run, dict(TINY, trace=bad), "trace"),
        (bitsim.run, dict(TINY, config={"clock.mhz" + bad: 100}), "config key"),
        (bitsim.run, dict(TINY, config={"ddr.model": bad}), "config['ddr.model']"),
        (bitsim.run, dict(TINY, config_file=bad), "config_file"),
        (bitsim.sweep, dict(grid={"clock.mhz": [100]}, check_model=bad), "check_model"),
        (bitsim.sweep, dict(grid={"clock.mhz" + bad: [100]}), "grid key"),
        (bitsim.sweep, dict(grid={"ddr.model": [bad]}), "grid['ddr.model']"),
        (bitsim.eval, dict(model="synthetic:tiny", text=bad), "text"),
        (bitsim.validate, dict(config_file=bad), "config_file"),
        (bitsim.config_keys, dict(config={"x": bad}), "config['x']"),
    ]
    for call, kwargs, name in cases:
        message = refused(call, **kwargs)
        assert message.startswith(name), (call.__name__, name, message)
        assert "lone surrogate" in message and "index 1" in message, message


def test_the_dram_outputs_follow_the_commands_rules(cli, tmp_path):
    """dram_trace= and dram_commands= as --dram-trace and --dram-commands: the same files as
    the command writes, refused when they name one file or a folder that does not exist, and
    a refused run leaves an earlier file as it was."""
    cycle = dict(TINY, fidelity="cycle", tokens=1, config={"ddr.model": "ddr3"})
    trace, commands = tmp_path / "t.csv", tmp_path / "c.csv"
    bitsim.run(**cycle, dram_trace=str(trace), dram_commands=str(commands))
    cli("run", "--quiet", "--model", "synthetic:tiny", "--prompt", TINY["prompt"], "--tokens", 1, "--fidelity",
        "cycle", "--set", "ddr.model=ddr3", "--dram-trace", tmp_path / "t2.csv", "--dram-commands",
        tmp_path / "c2.csv")
    assert trace.read_text() == (tmp_path / "t2.csv").read_text()
    assert commands.read_text() == (tmp_path / "c2.csv").read_text()
    message = refused(bitsim.run, **cycle, dram_trace=str(trace), dram_commands=str(trace))
    assert str(trace) in message, message
    before = trace.read_text()
    message = refused(bitsim.run, **cycle, dram_trace=str(tmp_path / "no" / "t.csv"))
    assert "no" in message, message
    assert trace.read_text() == before
    with pytest.raises(bitsim.InputTypeError, match="dram_trace"):
        bitsim.run(**cycle, dram_trace=3)


def test_every_int_argument_past_64_bits_and_every_path_with_a_nul_is_refused_naming_it():
    """The class "no error escapes unnamed": an int the binding's 64-bit integers cannot hold
    and a path no file can have are InputError naming the argument, never pybind11's own
    RuntimeError or TypeError."""
    text = "models/kjv-ternary/test.txt"
    calls = {
        "run": (lambda **kw: bitsim.run(**{**TINY, **kw}), ("tokens", "top_k", "threads", "seed")),
        "sweep": (lambda **kw: bitsim.sweep({"clock.mhz": [100]}, check_model=None, **kw),
                  ("tokens", "context", "jobs", "prompt_tokens")),
        "eval": (lambda **kw: bitsim.eval("synthetic:tiny", text, **kw), ("tokens", "board", "compare", "threads",
                                                                         "window")),
    }
    for call, (fn, names) in calls.items():
        for name in names:
            for v in (2**63, 2**64, 2**70, -2**63 - 1):
                if name == "seed" and v == 2**63:
                    continue  # a seed is an unsigned 64-bit integer
                with pytest.raises(bitsim.InputError, match=name) as e:
                    fn(**{name: v})
                assert not isinstance(e.value, (RuntimeError,)), (call, name, v)
    for name in ("model", "tokenizer", "config_file", "cache_dir", "trace", "layers_csv", "record_mmio",
                 "dram_trace", "dram_commands"):
        with pytest.raises(bitsim.InputError, match=f"{name}: the path .* holds a NUL"):
            bitsim.run(**{**TINY, name: "synthetic:tiny\0x" if name == "model" else "a\0b"})
