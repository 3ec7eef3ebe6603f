"""Every command that writes, against every place an output can point: one of its own inputs, a character device,
a FIFO, a symlink, a read-only file system, a full disk, a folder of someone else's files, and SIGTERM while it
writes. Each must lose nothing (what was there is unchanged, no temporary file is left) and, when it fails, say
one line naming the path."""

from __future__ import annotations

import os
import signal
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from mt.atomic_files import atomic_outputs, atomic_write
from tests.conftest import DATA, TINY, run_mt
from tests.faults.conftest import fails_cleanly, mounted, mt_process, snapshot

SOURCE = DATA / "dev.de"


@pytest.fixture(scope="module")
def model(trained_tiny) -> Path:
    return trained_tiny / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """Small source and reference files of the user's."""
    folder = tmp_path_factory.mktemp("inputs")
    lines = {side: (DATA / f"dev.{side}").read_text(encoding="utf-8").splitlines()[:4] for side in ("de", "en")}
    for side, text in lines.items():
        (folder / f"src.{side}").write_text("\n".join(text) + "\n", encoding="utf-8")
    return {"src": folder / "src.de", "ref": folder / "src.en"}


def writer_args(command: str, model: Path, inputs: dict[str, Path], out: Path) -> list:
    """The command line of each file-writing command, its output at `out` (named *.png so that plot takes it)."""
    return {
        "translate": ["translate", "-c", model, "-i", inputs["src"], "-o", out],
        "evaluate": ["evaluate", "-c", model, "--src", inputs["src"], "--ref", inputs["ref"], "-o", out],
        "average": ["average", model, "-o", out],
        "plot": ["plot", "attention", "-c", model, "--text", "Hallo Welt", "-o", out],
    }[command]


WRITERS = ["translate", "evaluate", "average", "plot"]


def no_temporary_files(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.startswith(".")], sorted(os.listdir(folder))


# ---------------------------------------------------------------- an output that is one of the inputs


@pytest.mark.parametrize("command, option, key", [("translate", "-i", "src"), ("evaluate", "--ref", "ref"),
                                                  ("evaluate", "--src", "src")])
def test_an_output_naming_one_of_the_inputs_is_refused(tmp_path, model, inputs, command, option, key):
    before = inputs[key].read_bytes()
    args = writer_args(command, model, inputs, inputs[key])
    line = fails_cleanly(run_mt(*args, check=False), inputs[key], option)
    assert "also the input" in line and inputs[key].read_bytes() == before


def test_an_output_naming_a_checkpoint_it_reads_is_refused(tmp_path, model):
    copy = tmp_path / "model.pt"
    copy.write_bytes(model.read_bytes())
    before = copy.read_bytes()
    fails_cleanly(run_mt("average", copy, "-o", copy, check=False), copy, "also the input")
    fails_cleanly(run_mt("translate", "-c", copy, "-o", copy, check=False, input="Hallo\n"), copy)
    assert copy.read_bytes() == before


def test_an_output_named_through_a_symlink_to_an_input_is_refused(tmp_path, model, inputs):
    link = tmp_path / "ref-link.txt"
    link.symlink_to(inputs["ref"])
    before = inputs["ref"].read_bytes()
    fails_cleanly(run_mt(*writer_args("evaluate", model, inputs, link), check=False), link, "--ref")
    assert inputs["ref"].read_bytes() == before and link.is_symlink()


# ---------------------------------------------------------------- devices, FIFOs, symlinks


@pytest.mark.parametrize("command", WRITERS)
def test_a_character_device_is_written_into_not_replaced(tmp_path, model, inputs, command):
    null = tmp_path / "null.png"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    run_mt(*writer_args(command, model, inputs, null))
    assert stat.S_ISCHR(null.stat().st_mode)
    no_temporary_files(tmp_path)


@pytest.mark.parametrize("command", WRITERS)
def test_a_full_device_is_one_line_and_stays_a_device(tmp_path, model, inputs, command):
    full = tmp_path / "full.png"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full's: every write fails with ENOSPC
    fails_cleanly(run_mt(*writer_args(command, model, inputs, full), check=False), full)
    assert stat.S_ISCHR(full.stat().st_mode)
    no_temporary_files(tmp_path)


@pytest.mark.parametrize("command", WRITERS)
def test_a_fifo_is_written_into_and_its_reader_gets_the_output(tmp_path, model, inputs, command):
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    run_mt(*writer_args(command, model, inputs, fifo))
    reader.join(timeout=60)
    assert received and len(received[0]) > 0 and stat.S_ISFIFO(fifo.stat().st_mode)


def test_dev_stdout_into_a_pipe_is_the_pipe(model, inputs):
    proc = run_mt("translate", "-c", model, "-i", inputs["src"], "-o", "/dev/stdout")
    assert len(proc.stdout.splitlines()) == 4


@pytest.mark.parametrize("command", WRITERS)
def test_a_symlink_is_written_through_and_stays_a_link(tmp_path, model, inputs, command):
    (tmp_path / "real").mkdir()
    target, link = tmp_path / "real" / "out.png", tmp_path / "link.png"
    target.write_text("old\n")
    link.symlink_to(target)
    run_mt(*writer_args(command, model, inputs, link))
    assert link.is_symlink() and target.read_bytes() != b"old\n" and target.stat().st_size > 0


@pytest.mark.parametrize("command", WRITERS)
def test_a_replaced_file_keeps_its_mode(tmp_path, model, inputs, command):
    out = tmp_path / "out.png"
    out.write_text("old\n")
    out.chmod(0o600)
    run_mt(*writer_args(command, model, inputs, out))
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.read_bytes() != b"old\n"


# ---------------------------------------------------------------- read-only, full, someone else's folder


@pytest.mark.parametrize("command", WRITERS)
def test_a_read_only_file_system_is_one_line_naming_the_output(tmp_path, model, inputs, command):
    with mounted(tmp_path / "ro", "ro") as ro:
        line = fails_cleanly(run_mt(*writer_args(command, model, inputs, ro / "out.png"), check=False),
                             ro / "out.png")
        assert "read-only file system" in line and not any(ro.iterdir())


@pytest.mark.parametrize("command", WRITERS)
def test_a_full_disk_keeps_the_old_output_and_leaves_no_temporary_file(tmp_path, model, inputs, command):
    with mounted(tmp_path / "disk", "size=8k") as disk:
        out = disk / "out.png"
        out.write_bytes(b"old\n")
        (disk / "filler").write_bytes(b"x" * 4096)
        before = snapshot(disk)
        fails_cleanly(run_mt(*writer_args(command, model, inputs, out), check=False), out)
        assert snapshot(disk) == before
        no_temporary_files(disk)


@pytest.mark.parametrize("command", WRITERS)
def test_an_output_that_is_a_folder_of_someone_elses_files_is_refused(tmp_path, model, inputs, command):
    folder = tmp_path / "work.png"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "main.py").write_text("print(1)\n")
    before = snapshot(folder)
    fails_cleanly(run_mt(*writer_args(command, model, inputs, folder), check=False), folder, "folder")
    assert snapshot(folder) == before


# ---------------------------------------------------------------- SIGTERM mid-write


def terminated_leaving_the_old_output(proc, out: Path) -> None:
    """SIGTERM to a command writing `out` (which held "old"): exit 143, "terminated", `out` as it was, no
    temporary file beside it."""
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.decode().strip().splitlines()[-1] == "terminated"
    assert out.read_text() == "old\n"
    no_temporary_files(out.parent)


def test_sigterm_while_translating_exits_143_and_leaves_the_old_output_whole(tmp_path, model):
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    proc = mt_process("translate", "-c", model, "-o", out)
    proc.stdin.write((DATA / "dev.de").read_bytes())  # stdin stays open: translate cannot finish before the signal
    proc.stdin.flush()
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".out.txt.*")) and time.monotonic() < deadline:
        time.sleep(0.1)  # translate writes as it goes: its temporary file is there
    assert list(tmp_path.glob(".out.txt.*")), "translate never started its output"
    terminated_leaving_the_old_output(proc, out)


def test_sigterm_while_evaluating_exits_143_and_leaves_the_old_output_whole(tmp_path, model):
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    many = {side: tmp_path / f"many.{side}" for side in ("de", "en")}  # ten times the dev set: minutes of work
    for side, path in many.items():
        path.write_text((DATA / f"dev.{side}").read_text(encoding="utf-8") * 10, encoding="utf-8")
    proc = mt_process(*writer_args("evaluate", model, {"src": many["de"], "ref": many["en"]}, out),
                      "--beam-size", "4")
    time.sleep(3)
    assert proc.poll() is None, "finished before the signal: the test proves nothing"
    terminated_leaving_the_old_output(proc, out)


# ---------------------------------------------------------------- exports


def test_export_force_replaces_only_an_earlier_export(tmp_path, model):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print(1)\n")
    before = snapshot(project)
    fails_cleanly(run_mt("export", "-c", model, "-o", project, "--force", check=False), project,
                  "mt export did not write")
    assert snapshot(project) == before
    fails_cleanly(run_mt("export", "-c", model, "-o", model.parent, "--force", check=False), model.parent)
    run_mt("export", "-c", model, "-o", tmp_path / "exported")
    run_mt("export", "-c", model, "-o", tmp_path / "exported", "--force")  # an earlier export: replaced
    assert (tmp_path / "exported" / "model.bin").is_file()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_an_export_onto_a_fifo_or_device_is_refused(tmp_path, model, kind):
    target = tmp_path / "out"
    os.mkfifo(target) if kind == "fifo" else os.mknod(target, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    fails_cleanly(run_mt("export", "-c", model, "-o", target, "--force", check=False), target, "not a folder")
    assert not stat.S_ISREG(target.stat().st_mode) and not stat.S_ISDIR(target.stat().st_mode)


def test_an_export_into_a_read_only_place_names_the_folder_not_a_temporary_one(tmp_path, model):
    with mounted(tmp_path / "ro", "ro") as ro:
        line = fails_cleanly(run_mt("export", "-c", model, "-o", ro / "exported", check=False), ro / "exported")
        assert ".exported." not in line and "read-only" in line.lower()


def test_an_export_onto_a_full_disk_names_the_folder_and_leaves_nothing(tmp_path, model):
    with mounted(tmp_path / "disk", "size=64k") as disk:
        line = fails_cleanly(run_mt("export", "-c", model, "-o", disk / "exported", check=False), disk / "exported")
        assert ".exported." not in line and not any(disk.iterdir())


# ---------------------------------------------------------------- prepare and train


def test_a_corpus_edited_after_prepare_is_named_and_not_trained_on(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for side in ("de", "en"):
        lines = (DATA / f"sample-2k.{side}").read_text(encoding="utf-8").splitlines()[:300]
        (corpus / f"train.{side}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["--set", f"output_dir={tmp_path / 'run'}", "--set", f"data.train_src={corpus / 'train.de'}",
            "--set", f"data.train_tgt={corpus / 'train.en'}", "--set", "data.dev_src=null", "--set",
            "data.dev_tgt=null", "--set", "tokenizer.vocab_size=200"]
    run_mt("prepare", TINY, *args)
    assert "up to date" in run_mt("prepare", TINY, *args).stderr
    for side in ("de", "en"):
        path = corpus / f"train.{side}"
        path.write_text("".join(path.read_text(encoding="utf-8").splitlines(keepends=True)[:100]), encoding="utf-8")
    for command in ("prepare", "train"):
        line = fails_cleanly(run_mt(command, TINY, *args, check=False), corpus / "train.de", "--restart")
        assert "changed since" in line
    assert "kept" in run_mt("prepare", TINY, *args, "--restart").stderr


class _Signalled(BaseException):
    pass


@pytest.mark.parametrize("outputs", [1, 3])
def test_sigterm_while_the_temporary_files_are_made_leaves_none(tmp_path, monkeypatch, outputs):
    """SIGTERM (raised as mt/cli/exit_codes.py raises it) the moment a temporary file exists, before the writer
    has recorded its name: it arrives once the name is recorded, and the file is removed on the way out."""
    made = tempfile.mkstemp

    def signalled_mkstemp(*args, **kwargs):
        fd, name = made(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)  # delivered here unless the caller holds it
        return fd, name

    def raise_signalled(signum, frame):
        raise _Signalled

    monkeypatch.setattr(tempfile, "mkstemp", signalled_mkstemp)
    previous = signal.signal(signal.SIGTERM, raise_signalled)
    try:
        with pytest.raises(_Signalled):
            if outputs == 1:
                atomic_write(tmp_path / "out.txt", lambda f: f.write(b"new\n"))
            else:
                with atomic_outputs([tmp_path / f"out{i}.txt" for i in range(outputs)]) as files:
                    files[0].write(b"new\n")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert sorted(os.listdir(tmp_path)) == []
