"""Shared helpers of the Python module's tests (ctest label `python`; tests/python/tests.cmake).

The module comes from PYTHONPATH (build/python), the bitsim command it is compared with from
BITSIM_BINARY, the repository from BITSIM_SOURCE_DIR; both use the build tree's start-up
cache (BITSIM_CACHE_DIR), never the user's.
"""

import json
import os
import pathlib
import subprocess

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("BITSIM_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BINARY = os.environ.get("BITSIM_BINARY", str(SOURCE_DIR / "build" / "bitsim"))


class Cli:
    """The bitsim command, for the same inputs as an API call."""

    def __call__(self, *args, check=True):
        p = subprocess.run([BINARY, *map(str, args)], capture_output=True, text=True, errors="replace",
                           stdin=subprocess.DEVNULL, timeout=600)
        if check and p.returncode != 0:
            raise AssertionError(f"bitsim {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}")
        return p

    def json(self, *args):
        return json.loads(self(*args).stdout)

    def error(self, *args):
        """The message of a refused command (exit 2), without the "bitsim: error: " prefix."""
        p = self(*args, check=False)
        assert p.returncode == 2, f"exit {p.returncode}: {p.stderr}"
        line = [ln for ln in p.stderr.splitlines() if ln.startswith("bitsim: error: ")]
        assert line, p.stderr
        return line[-1][len("bitsim: error: "):]


@pytest.fixture(scope="session")
def cli():
    return Cli()


@pytest.fixture(scope="session")
def source_dir():
    return SOURCE_DIR


def fnv1a64(data: bytes) -> int:
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def column(table, name):
    """A column as a plain list, from a DataFrame or a dict of numpy arrays."""
    c = table[name]
    return c.tolist() if hasattr(c, "tolist") else list(c)
