"""`mt` commands for the tests: real processes, forked from one that has already imported torch and mt.

A fresh `python -m mt` spends about two seconds importing torch and mt before it reads its arguments, and the
suite runs some five hundred commands. A forkserver (multiprocessing's, with those modules preloaded) forks each
command instead: a process of its own, with its own standard streams (files here), environment, working folder,
exit code and signal handlers, that runs `python -m mt`'s own `__main__` and exits as the interpreter would (an
uncaught exception's traceback and 1, `sys.exit`'s code, atexit handlers run). Where the environment changes what
is read at import, the command gets a fresh interpreter.
"""

from __future__ import annotations

import atexit
import io
import locale
import multiprocessing
import os
import runpy
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path

PRELOADED = ["torch", "mt.cli", "mt.decoding.loading", "mt.commands.translate", "mt.decoding.scoring",
             "mt.training.loop"]  # imported once, in the forkserver (with what they import)
READ_AT_IMPORT = ("PYTHON", "OMP_", "MKL_", "GOMP_", "THP_", "ONEDNN_", "LRU_CACHE", "TORCH", "KMP_")

FORKSERVER = multiprocessing.get_context("forkserver")  # started, with PRELOADED, at the first command
FORKSERVER.set_forkserver_preload(PRELOADED)


def run_command(argv: list[str], input: str | None, env: dict[str, str], timeout: float,
                cwd: Path) -> subprocess.CompletedProcess:
    """`python -m mt ARGV` with `input` on stdin (empty if None), stdout and stderr captured as text."""
    command = [sys.executable, "-m", "mt", *argv]
    changed = {k for k in env.keys() | os.environ.keys() if env.get(k) != os.environ.get(k)} - {"PYTHONUNBUFFERED"}
    if any(k.startswith(READ_AT_IMPORT) for k in changed):
        return subprocess.run(command, capture_output=True, text=True, input=input or "", env=env, timeout=timeout,
                              cwd=cwd)
    with tempfile.TemporaryDirectory(prefix="mt-command-") as folder:
        streams = [Path(folder) / name for name in ("stdin", "stdout", "stderr")]
        streams[0].write_text(input or "", encoding="utf-8")
        for path in streams[1:]:
            path.touch()
        process = FORKSERVER.Process(target=_command, args=(argv, env, str(cwd), [str(p) for p in streams]))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(command, timeout)
        out, err = (_text(path.read_bytes()) for path in streams[1:])
    return subprocess.CompletedProcess(command, process.exitcode, out, err)


def _text(data: bytes) -> str:
    """As `subprocess.run(text=True)` decodes: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


def _command(argv: list[str], env: dict[str, str], cwd: str, streams: list[str]) -> None:
    """In the forked process: the streams on fds 0-2 (as PYTHONUNBUFFERED makes them), the environment and the
    folder, then mt's `__main__`; the process ends as the interpreter ends it."""
    encoding, errors = sys.stdout.encoding, sys.stdout.errors
    for fd, path in enumerate(streams):
        opened = os.open(path, os.O_RDONLY if fd == 0 else os.O_WRONLY)
        os.dup2(opened, fd)
        os.close(opened)
    sys.stdin = io.open(0, "r", encoding=encoding, errors=errors, closefd=False)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding, errors, write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding, "backslashreplace", write_through=True)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["-m", *argv]
    try:
        runpy.run_module("mt", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as e:
        code = _exit_code(e.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    threading._shutdown()  # as the interpreter's exit: wait for threads that are not daemons, then atexit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1
