"""Writing files so that they are complete or absent (a temporary file beside the target, then a rename), and
reading back JSON (the records mt writes, and other tools' files), a damaged one as a one-line error."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import tempfile
import threading
from pathlib import Path

from mt.errors import MtError

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def _signals_held():
    """Ctrl-C and SIGTERM held while a temporary file is made and its name recorded: raised between the two
    (mt/cli/exit_codes.py raises on SIGTERM), they would leave a file that nothing removes. One that arrives
    meanwhile is handled when the block ends. Handlers run in the main thread only, so another thread has nothing
    to hold (and may not set them). A mask would not do: another thread of the process takes the signal."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived = []
    handlers = {signum: signal.signal(signum, lambda *sig: arrived.append(sig)) for signum in SIGNALS}
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: not set from Python
        if arrived:  # the first is enough: mt/cli/exit_codes.py ignores a second SIGTERM
            signum, frame = arrived[0]
            if callable(handlers[signum]):
                handlers[signum](signum, frame)
            elif handlers[signum] == signal.SIG_DFL:
                os.kill(os.getpid(), signum)


def atomic_write(path: Path, write) -> None:
    """Write through `write(file)` to a temporary file beside `path`, then rename it over `path`.

    Only a regular file (or a new one) is replaced: a device, a FIFO or a socket at `path` (`/dev/null`,
    `/dev/stdout`, a named pipe) is written into, as Unix tools write into them. A replaced file keeps its mode;
    a new one gets the mode `open()` would give it (0666 less the umask). A symlink at `path` is written through
    (its target is replaced, the link stays). An OSError names `path`, whatever call raised it.
    """
    if is_special(path):
        _write_into(path, write)
        return
    path = Path(os.path.realpath(path))
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _signals_held():
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, mode_for(path))
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        _remove(tmp)
        raise _naming(e, path) from None
    except BaseException:
        _remove(tmp)
        raise


def is_special(path: Path) -> bool:
    """Whether `path` (followed through symlinks) exists and is not a regular file or a folder."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _write_into(path: Path, write) -> None:
    """Write into a device or a FIFO, opened as it is: nothing to rename, nothing to remove on failure."""
    try:
        with open(path, "wb") as f:
            write(f)
            f.flush()
    except OSError as e:
        raise _naming(e, path) from None


def mode_for(path: Path) -> int:
    """The permission bits a file replacing `path` gets: those of the file it replaces, else a new file's."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def _naming(e: OSError, path: Path) -> OSError:
    """`e` with `path` as its file name (the temporary file beside it means nothing to the user)."""
    return OSError(e.errno, e.strerror or str(e), str(path))


def _remove(tmp: str | None) -> None:
    if tmp is not None:
        Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def atomic_write_dir(path: Path, write) -> None:
    """Fill a temporary directory beside `path` through `write(folder)`, then put it in place of `path`."""
    path, tmp = Path(path), None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with _signals_held():
            tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}."))
        tmp.chmod(0o777 & ~_umask())  # mkdtemp makes it private; the result is an ordinary directory
        write(tmp)
        _replace_dir(tmp, path)
    except BaseException as e:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(e, OSError):
            raise _naming(e, _as_named(e.filename, tmp, path)) from None
        raise


def _as_named(filename, tmp: Path | None, path: Path) -> Path:
    """The file an error names, with the temporary folder `tmp` (or its making) replaced by `path`."""
    if not filename:
        return path
    failed = Path(filename)
    if tmp is not None and (failed == tmp or tmp in failed.parents):
        return path / failed.relative_to(tmp)
    if failed.parent == path.parent and failed.name.startswith(f".{path.name}."):
        return path
    return failed


def _replace_dir(new: Path, target: Path) -> None:
    """Rename `new` to `target`; an existing `target` is moved aside first and removed after."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.old."))
        os.replace(target, old / "dir")
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_outputs(paths: list[Path]):
    """Open a temporary file beside each of `paths` for writing (binary); when the block ends without an
    error, put all of them in place, otherwise remove them: the outputs are complete or absent. A device or a
    FIFO among `paths` is written into as it is. An OSError while writing names the file it was writing."""
    files = []
    try:
        for given in paths:
            if is_special(Path(given)):  # a device or FIFO is written into, as atomic_write does
                files.append(_NamedWriter(open(given, "wb"), None, Path(given)))
                continue
            path = Path(os.path.realpath(given))
            path.parent.mkdir(parents=True, exist_ok=True)
            with _signals_held():
                fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
                files.append(_NamedWriter(os.fdopen(fd, "wb", buffering=1 << 20), tmp, path))
            os.fchmod(fd, mode_for(path))  # a replaced file keeps its mode
        yield files
        for f in files:
            f.finish()
        for f in files:
            if f.tmp is not None:
                os.replace(f.tmp, f.path)
    except OSError as e:
        raise OSError(e.errno, e.strerror or str(e), e.filename or str(paths[0])) from None
    finally:
        for f in files:
            with contextlib.suppress(OSError):  # a failed write's buffer fails again here: reported above
                f.file.close()
            _remove(f.tmp)


class _NamedWriter:
    """A file being written to `tmp` for `path`; its OSErrors name `path`."""

    def __init__(self, file, tmp: str | None, path: Path):
        self.file, self.tmp, self.path = file, tmp, path

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(self.path)) from None

    def finish(self) -> None:
        try:
            self.file.flush()
            if self.tmp is not None:  # a device or FIFO has nothing to sync
                os.fsync(self.file.fileno())
        except OSError as e:
            raise OSError(e.errno, e.strerror, str(self.path)) from None


def read_json(path: Path, shown: str | None = None):
    """A JSON file's value, or a one-line error naming `shown` (default: the path)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise MtError(f"{shown or path}: not readable JSON ({str(e).splitlines()[0]})") from None


def read_json_object(path: Path, shown: str | None = None) -> dict:
    """A JSON file that must hold an object (another tool's config or metadata), as `read_json`."""
    value = read_json(path, shown)
    if not isinstance(value, dict):
        raise MtError(f"{shown or path}: not a JSON object")
    return value


def read_record(path: Path, remedy: str, keys: tuple[str, ...] = ()) -> dict:
    """A JSON object mt wrote (mt distill's state files, mt prepare's stamp) holding `keys`, or a one-line error
    naming the file, what is wrong with it and `remedy`."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise MtError(f"{path}: damaged (not JSON: {e.msg} at line {e.lineno} column {e.colno}); {remedy}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MtError(f"{path}: damaged ({getattr(e, 'strerror', None) or 'not UTF-8'}); {remedy}") from None
    if not isinstance(record, dict) or any(key not in record for key in keys):
        raise MtError(f"{path}: damaged (not the record mt writes there); {remedy}")
    return record
