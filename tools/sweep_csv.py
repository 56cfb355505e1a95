"""Reading a `bitsim sweep --csv` file for the plot scripts: one reader, one set of errors."""
import csv


def read_sweep_rows(path, need, expected, fail):
    """The rows of the sweep CSV at `path` as dicts. Bad input goes to fail(message), which
    exits: an unreadable file, a file without rows, a column of `need` missing (the message
    ends with `expected`, what kind of file was meant)."""
    try:
        with open(path, newline="") as f:
            # "# ..." lines: a partial sweep's marker (stopped by a signal), not a row
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    if not rows:
        fail(f"{path}: no rows")
    for n in need:
        if n not in rows[0]:
            fail(f"{path}: column '{n}' missing ({expected})")
    return rows
