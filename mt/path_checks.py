"""The paths a command reads and writes, checked together before any work (mt/cli/ declares them per command with
mt/cli/path_parameters.py's `files(...)`): no output is one of the inputs or another output (after following links), an
output is not a folder and can be written, a device or FIFO is accepted as it is (mt/atomic_files.py writes into it), an
input exists, and an input that is read by seeking in it is not a pipe.
Every message is one line naming the option and the path the user gave."""

from __future__ import annotations

import os
from pathlib import Path

from mt.errors import MtError
from mt.atomic_files import is_special

PathArg = str | Path | None


def check_input(path: PathArg, option: str = "-i") -> None:
    """A file to read: fail before any work if it is missing, a folder or unreadable."""
    if path is None:
        return
    if not os.path.exists(path):
        raise MtError(f"{option} {path}: no such file")
    if os.path.isdir(path):
        raise MtError(f"{option} {path}: is a folder, not a file")
    if not os.access(path, os.R_OK):
        raise MtError(f"{option} {path}: not readable (permission denied)")


def check_output(path: PathArg, option: str = "-o", inputs=None) -> None:
    """A file to write: fail before any work if it is a folder, one of the command's `inputs` ({option: path}, or
    (option, path) pairs), a file that may not be written, or in a folder that cannot take a new file. A device or
    a FIFO is written into as it is (mt/atomic_files.py)."""
    if path is None:
        return
    pairs = inputs.items() if isinstance(inputs, dict) else inputs or []
    for input_option, input_path in pairs:
        if input_path is not None and same_file(path, input_path):
            raise MtError(f"{option} {path}: is also the input {input_option} {input_path}; write the output "
                          "to another file")
    if is_special(Path(path)):
        return
    target = Path(os.path.realpath(path))  # a symlink is written through
    if target.is_dir():
        raise MtError(f"{option} {path}: is a folder, not a file")
    check_writable_place(target, option, path)


def check_writable_place(target: Path, option: str, given: PathArg) -> None:
    """`target` (a file or a folder to make) can be written: its folder exists and takes new files, and an
    existing target may be replaced."""
    folder = target.parent
    if not folder.is_dir():
        raise MtError(f"{option} {given}: no such folder {folder}")
    if target.exists() and not os.access(target, os.W_OK):
        raise MtError(f"{option} {given}: {_why_not_writable(target)}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise MtError(f"{option} {given}: cannot write in {folder} ({_why_not_writable(folder)})")


def check_files(reads: list[tuple[str, PathArg]], writes: list[tuple[str, PathArg]],
                folders: list[tuple[str, PathArg]], seeks: list[tuple[str, PathArg]] = ()) -> None:
    """One command's files, as (option, path) pairs: every output file (`writes`) and output folder (`folders`) is
    none of the inputs (`reads`, files or folders) and none of the other outputs, and can be written; no input
    read by seeking in it (`seeks`) is a pipe."""
    for option, path in seeks:
        if path is not None and is_special(Path(path)):
            raise MtError(f"{option} {path}: is a pipe or a device, but mt seeks in this input or reads it more than "
                          "once; save it to a file and give that")
    reads = [(option, path) for option, path in reads if path is not None]
    writes = [(option, path) for option, path in writes if path is not None]
    folders = [(option, path) for option, path in folders if path is not None]
    for option, path in writes:
        check_output(path, option, reads)
    outputs = writes + folders
    for i, (option, path) in enumerate(outputs):
        for other_option, other in outputs[:i]:
            if same_file(path, other) and os.path.realpath(path) != os.devnull:
                raise MtError(f"{option} {path}: is also the output {other_option} {other}; give each output a "
                              "file of its own")
    for option, path in folders:
        _check_output_folder(path, option, reads)


def _check_output_folder(path: PathArg, option: str, reads: list[tuple[str, PathArg]]) -> None:
    """A folder to write (replaced whole): not an input, not holding an input, not a device or a file."""
    target = Path(os.path.realpath(path))
    for input_option, input_path in reads:
        read = Path(os.path.realpath(input_path))
        if read == target or target in read.parents:
            raise MtError(f"{option} {path}: holds the input {input_option} {input_path}; write the output to "
                          "another folder")
    if is_special(Path(path)):
        raise MtError(f"{option} {path}: is a device or a pipe, not a folder")
    while not target.parent.exists():  # the folders above it are made too: check the first that exists
        target = target.parent
    check_writable_place(target, option, path)


def same_file(a: PathArg, b: PathArg) -> bool:
    """Whether `a` and `b` name one file: the same file on disk, or, where one does not exist yet, the same path
    once links are followed."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def _why_not_writable(path: Path) -> str:
    return "read-only file system" if os.statvfs(path).f_flag & os.ST_RDONLY else "permission denied"
