"""How an `mt` command ends: an exit code for each way (done, an error, a usage error, Ctrl-C, SIGTERM, a closed
stdout), one line on stderr for a failure, and nothing left half-written. mt/cli/__init__.py's `main` runs its commands
through `run_and_exit`."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys

import typer

from mt.errors import MtError

try:  # typer 0.2x carries its own copy of click; earlier ones use click itself
    from typer._click import exceptions as click
except ImportError:
    from click import exceptions as click


class OutputClosed(Exception):
    """Whoever read stdout closed it: the command ends quietly with 141, as `seq 1 100000 | head -1` does."""


class Terminated(BaseException):
    """SIGTERM arrived: raised where the command is, as Ctrl-C's KeyboardInterrupt is, so that what it was
    writing is removed on the way out (mt/atomic_files.py) instead of left half-written."""


def run_and_exit(app: typer.Typer) -> None:
    """Exit codes: 0 done; 1 an error, one line on stderr; 2 a usage error (typer's); 130 Ctrl-C; 143 SIGTERM
    (what was being written is removed); 141 the reader of stdout went away (a closed pipe, as other Unix tools
    end); `mt train` stopped by a signal, 128 + its number (130 SIGINT, 143 SIGTERM) after saving a checkpoint
    it resumes from."""
    signal.signal(signal.SIGTERM, _terminated)  # `mt train` and `mt serve` handle it themselves while they run
    if sys.stdout is None:  # started with stdout closed (`>&-`): a command that prints says so
        sys.stdout = _ClosedStream()
    try:
        code = app(standalone_mode=False)
        if code == 130:  # typer turns a KeyboardInterrupt into this code
            _fail(None, "interrupted", 130)
        sys.exit(code if isinstance(code, int) else 0)
    except click.NoArgsIsHelpError as e:  # `mt` or `mt plot` alone: the help text
        print(e.format_message(), file=sys.stderr)
        sys.exit(2)
    except click.ClickException as e:  # a usage error: one line, not click's framed box
        _fail(None, f"error: {e.format_message()} (see mt --help)", e.exit_code)
    except typer.Abort:
        _fail(None, "interrupted", 130)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except MtError as e:
        _fail(e, f"error: {e}", 1)
    except KeyboardInterrupt:
        _fail(None, "interrupted", 130)
    except Terminated:
        _fail(None, "terminated", 128 + signal.SIGTERM)
    except (OutputClosed, BrokenPipeError):
        _quiet_stdout()
        sys.exit(141)
    except OSError as e:  # a full disk, a read-only folder, a closed stdout: the system's reason, with the file
        where = f"{e.filename}: " if e.filename else ""
        _fail(e, f"error: {where}{e.strerror or e}", 1)


def exit_without_teardown() -> None:
    """End the process once every output is written and flushed, skipping the interpreter's teardown: torch's
    takes 0.3 s (torch 2.13, 2 cores), 7% of an `mt translate` of the 883 dev sentences, and does nothing a
    translation needs (an output file is already renamed into place, stdout flushed after each block)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _terminated(signum, frame) -> None:
    # `timeout` signals the command, then its whole process group: the same process can get SIGTERM twice, the
    # second while the first unwinds (removing what it was writing). One is enough.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated


class _ClosedStream(io.TextIOBase):
    def write(self, text: str) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def _fail(error: BaseException | None, line: str, code: int) -> None:
    if error is not None and os.environ.get("MT_DEBUG"):
        raise error
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:  # stderr closed too
        pass
    _quiet_stdout()
    sys.exit(code)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of a closed pipe raises nothing more."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
