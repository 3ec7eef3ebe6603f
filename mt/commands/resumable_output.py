"""An output file of `mt translate` written in durable chunks, so that the same command, run again after any
interruption (Ctrl-C, SIGTERM, SIGKILL, power loss), goes on where the last complete chunk ends.

Beside `-o OUT` it keeps OUT.partial (the results so far, appended a chunk at a time, flushed and synced) and
OUT.resume.json (what made them: the input by path, size, mtime and the sha256 of the bytes read so far, the
model files by content, the decoding and line options; how many input lines, input bytes and output bytes are
done). The record is rewritten, atomically, after each chunk is on disk, so a partial file is cut back to the
record's length on resume and the next chunk starts on the same input line as in a run never stopped: its chunks,
and so its batches and its results, are those of that run. A run with anything different is refused in one line
(`--restart` starts over). The finished file is renamed onto OUT and the record removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from pathlib import Path

from mt.atomic_files import atomic_write_text, mode_for, read_record
from mt.errors import MtError

PARTIAL, RECORD = ".partial", ".resume.json"


def file_digest(path: Path) -> str:
    """sha256 of a file, or of an exported directory's model.bin."""
    path = path / "model.bin" if path.is_dir() else path
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


class ResumableOutput:
    """`start()` (lines and input bytes already done), `add(text, lines, raw)` per chunk, `finish()`."""

    def __init__(self, output: str | Path, input_path: str | Path, made_by: dict, restart: bool = False,
                 start_byte: int = 0):
        # through a symlink to its target, as atomic_write writes (mt/atomic_files.py); messages name it as given
        self.shown, self.output, self.input = Path(output), Path(os.path.realpath(output)), Path(input_path)
        self.partial = self.output.with_name(self.output.name + PARTIAL)
        self.record = self.output.with_name(self.output.name + RECORD)
        stat = self.input.stat()
        self.made_by = {"input": {"path": os.path.realpath(self.input), "size": stat.st_size,
                                  "mtime_ns": stat.st_mtime_ns}, **made_by}
        self.restart, self.digest, self.start_byte = restart, hashlib.sha256(), start_byte  # a shard's start
        self.lines = self.input_bytes = self.output_bytes = 0
        self.fd: int | None = None  # the partial file, locked (`_lock`)

    def start(self) -> tuple[int, int]:
        """(input lines, input bytes) an earlier run of the same command already translated: 0, 0 for a new one.
        Refuses, before writing anything, files beside the output that mt did not make, another run made, or
        another run is writing now."""
        found = self._recorded()
        if found is None:
            self._save()  # the record first: a .partial without one is not mt's
            self._lock()
            os.ftruncate(self.fd, 0)
            os.fchmod(self.fd, mode_for(self.output))  # a replaced file keeps its mode
            return 0, 0
        self.lines, self.input_bytes, self.output_bytes = found["lines"], found["input_bytes"], found["output_bytes"]
        with open(self.input, "rb") as f:
            f.seek(self.start_byte)
            left = self.input_bytes
            while left and (data := f.read(min(left, 1 << 22))):
                self.digest.update(data)
                left -= len(data)
        if self.digest.hexdigest() != found["input_sha256"]:
            self._refuse("its first lines are not the ones translated before")
        os.ftruncate(self.fd, self.output_bytes)
        return self.lines, self.input_bytes

    def _recorded(self) -> dict | None:
        remedy = "pass --restart to start over"
        if self.partial.exists():
            self._lock()  # before anything is read or removed: refused while another run writes it
        if not self.record.exists():
            if self.partial.exists():  # --restart or not: mt did not write it
                raise MtError(f"{self.partial}: is in the way (mt did not write it: no {self.record.name}); move it, "
                              "or give another -o")
            return None
        if self.restart:
            self.record.unlink()
            self.partial.unlink(missing_ok=True)
            return None
        found = read_record(self.record, remedy, ("made_by", "lines", "input_bytes", "output_bytes",
                                                  "input_sha256"))
        if not self.partial.is_file() or self.partial.stat().st_size < found["output_bytes"]:
            raise MtError(f"{self.partial}: shorter than {self.record.name} says (not the file mt wrote); {remedy}")
        for key, value in self.made_by.items():
            if found["made_by"].get(key) != value:
                self._refuse(f"its {key}: {_difference(found['made_by'].get(key), value)}")
        return found

    def _lock(self) -> None:
        """The partial file opened (made if need be) and locked for as long as this process lives (flock: the
        kernel drops it when the process ends in any way, as mt/folder_lock.py's)."""
        if self.fd is not None:
            os.close(self.fd)
        self.fd = os.open(self.partial, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            raise MtError(f"-o {self.shown}: another run is writing {self.partial.name} now; wait for it to end, "
                          "or give another -o") from None

    def _refuse(self, why: str) -> None:
        raise MtError(f"-o {self.shown}: an interrupted run is there ({self.record.name}), but not of this command: "
                      f"{why}; run the same command to resume it, or pass --restart to start over")

    def add(self, text: str, lines: int, raw: bytes) -> None:
        """One chunk's results, for `lines` input lines read as `raw`: on disk before the record counts them."""
        data = text.encode("utf-8")
        try:
            with open(self.partial, "ab") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            self.digest.update(raw)
            self.lines, self.input_bytes, self.output_bytes = (self.lines + lines, self.input_bytes + len(raw),
                                                               self.output_bytes + len(data))
            self._save()
        except OSError as e:
            raise MtError(f"-o {self.shown}: cannot write {self.partial.name}: {e.strerror or e}; the {self.lines:,} "
                          "lines before are kept: make room and run the same command to go on") from None

    def _save(self) -> None:
        atomic_write_text(self.record, json.dumps({
            "made_by": self.made_by, "lines": self.lines, "input_bytes": self.input_bytes,
            "output_bytes": self.output_bytes, "input_sha256": self.digest.hexdigest()}, indent=1) + "\n")

    def finish(self) -> None:
        os.replace(self.partial, self.output)
        self.record.unlink()

    def remove(self) -> None:
        """The partial file and its record gone (a torchrun part, once joined into -o)."""
        self.partial.unlink(missing_ok=True)
        self.record.unlink(missing_ok=True)


def _difference(before, now, where: str = "") -> str:
    """The first values that differ, by their dotted place: `decode.beam_size 1 then, 2 now`."""
    if isinstance(before, dict) and isinstance(now, dict):
        keys = [k for k in sorted({*before, *now}) if before.get(k) != now.get(k)]
        return "; ".join(_difference(before.get(k), now.get(k), f"{where}.{k}" if where else k) for k in keys[:3])
    return f"{where} {json.dumps(before)} then, {json.dumps(now)} now".strip()
