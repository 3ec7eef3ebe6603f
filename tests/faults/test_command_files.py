"""Every command's files, enumerated from the command line's own definition (mt/cli/'s `files(...)` on each
command): every parameter that names a file is declared; each output is tried against each input of the same call,
against the command's other outputs, a folder, a missing folder and a read-only file system, and each must be
refused before any work in one line naming the option and the path; a device or a FIFO passes, to be written into.
Each input is given as a FIFO and as /dev/stdin to a real call of its command: it is read once, to the output the
file gives, or refused in one line before any work where mt seeks in it (`files(seeks=...)`).
A command added later is covered here without a new test. Signals: SIGTERM as `timeout` sends it (to the command,
then to its process group: twice) during each long command ends it with 143 and one line, leaving nothing
half-written."""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import os
import shutil
import signal
import subprocess
import threading
import time
import typing
from pathlib import Path
from xml.sax.saxutils import escape

import pytest
import yaml
from typer.testing import CliRunner

import mt.cli as cli
from mt.cli.path_parameters import option_label
from mt.cli.training import clean
from mt.errors import MtError
from mt.path_checks import check_files
from mt.serving.suggestions import Suggestions
from tests.conftest import DATA, TINY, run_mt, tiny_overrides
from tests.faults.conftest import mounted, mt_process, snapshot

# Parameters whose names say they hold a path, whatever their type (some are plain strings on the command line).
PATH_NAMES = {"input", "output", "src", "tgt", "ref", "hyp", "report", "rejected", "api_keys", "model",
              "checkpoint", "checkpoints", "config", "directory", "path", "run_dirs"}


def _commands() -> list[tuple[list[str], object]]:
    """(the words that call it, its function) for every command and subcommand of `mt`."""
    found = [([info.name or info.callback.__name__], info.callback) for info in cli.app.registered_commands]
    for group in cli.app.registered_groups:
        found += [([group.name, info.name or info.callback.__name__], info.callback)
                  for info in group.typer_instance.registered_commands]
    return found


COMMANDS = _commands()
IDS = [" ".join(words) for words, _ in COMMANDS]


def _parameters(command) -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(command, eval_str=True).parameters)


def _names_a_path(parameter: inspect.Parameter) -> bool:
    def has_path(annotation) -> bool:
        return annotation is Path or any(has_path(arg) for arg in typing.get_args(annotation))
    return parameter.name in PATH_NAMES or has_path(parameter.annotation)


def _is_argument(parameter: inspect.Parameter) -> bool:
    """Given by position: declared an argument, or (as typer reads a plain parameter) without a default."""
    infos = typing.get_args(parameter.annotation)[1:]
    if any(isinstance(x, cli.typer.models.ArgumentInfo) for x in infos):
        return True
    return parameter.default is inspect.Parameter.empty and not any(
        isinstance(x, cli.typer.models.OptionInfo) for x in infos)


def test_the_enumeration_finds_every_command():
    assert {"translate", "evaluate", "score", "clean", "export", "import", "plot curves", "serve"} <= set(IDS)


@pytest.mark.parametrize("words, command", COMMANDS, ids=IDS)
def test_every_parameter_that_names_a_file_is_declared(words, command):
    declared = getattr(command, "files", None)
    assert declared is not None, f"mt {' '.join(words)}: declare its files with @files(...)"
    parameters = _parameters(command)
    named = {name for name, p in parameters.items() if _names_a_path(p)}
    listed = {*declared.reads, *declared.writes, *declared.folders}
    assert named <= listed, f"undeclared: {named - listed}"
    assert listed <= set(parameters), f"not parameters: {listed - set(parameters)}"


# ---------------------------------------------------------------- calls built from the declarations


class Call:
    """A call of one command with a value for every declared file (inputs exist, outputs are new) and for every
    required parameter; `run` gives it to the real command line in this process."""

    def __init__(self, words: list[str], command, folder: Path):
        self.words, self.command, self.declared = words, command, command.files
        self.parameters = _parameters(command)
        self.values: dict[str, str] = {}
        for name in self.declared.reads:
            path = folder / f"in.{name}"  # each its own extension (mt clean names its outputs by them)
            path.write_text("x\n")
            self.values[name] = f"de:en={path}" if name == "model" else str(path)
        for name in (*self.declared.writes, *self.declared.folders):
            self.values[name] = str(folder / f"out_{name}")
        for name, parameter in self.parameters.items():
            if name not in self.values and parameter.default is inspect.Parameter.empty:
                self.values[name] = "1"

    def label(self, name: str) -> str:
        return option_label(self.parameters[name])

    def args(self, **changes) -> list[str]:
        values, args = {**self.values, **changes}, list(self.words)
        for name, value in values.items():
            args += [value] if _is_argument(self.parameters[name]) else [self.label(name), value]
        return args

    def refused(self, **changes) -> str:
        """The one-line error of the call with `changes`, raised before the command's own work."""
        result = CliRunner().invoke(cli.app, self.args(**changes))
        assert isinstance(result.exception, MtError), (self.args(**changes), result.exception, result.output)
        message = str(result.exception)
        assert "\n" not in message
        return message

    def guard(self, **changes) -> None:
        """Only the check of the files (for outputs the command would then open: a FIFO blocks without a reader)."""
        values = {name: self.values.get(name) for name in self.parameters} | changes
        check_files(*self.declared.paths(self.command, values))

    def read_paths(self, name: str) -> list:
        """The files an input stands for (`plot curves RUN_DIR`: its metrics.jsonl)."""
        expand = dict(self.declared.expand).get(name)
        return expand([self.values[name]], self.values) if expand else [self.values[name]]

    def plain_writes(self) -> list[str]:
        """The outputs that are one file each (mt clean's -o PREFIX stands for two: tested below)."""
        expanded = dict(self.declared.expand)
        return [name for name in self.declared.writes if name not in expanded]


WRITERS = [(words, command) for words, command in COMMANDS if command.files.writes or command.files.folders]
WRITER_IDS = [" ".join(words) for words, _ in WRITERS]


@pytest.mark.parametrize("words, command", WRITERS, ids=WRITER_IDS)
def test_an_output_naming_an_input_of_the_same_call_is_refused(tmp_path, words, command):
    call = Call(words, command, tmp_path)
    for output in (*call.plain_writes(), *call.declared.folders):
        for read in call.declared.reads:
            path = str(call.read_paths(read)[0])
            message = call.refused(**{output: path})
            assert message.startswith(f"{call.label(output)} {path}:") and "input" in message, message
        for read in call.declared.reads:
            assert Path(call.values[read].partition("=")[2] or call.values[read]).read_text() == "x\n"


@pytest.mark.parametrize("words, command", WRITERS, ids=WRITER_IDS)
def test_two_outputs_of_one_call_naming_the_same_file_are_refused(tmp_path, words, command):
    call = Call(words, command, tmp_path)
    writes = call.plain_writes()
    for i, first in enumerate(writes):
        for second in writes[i + 1:]:
            same = str(tmp_path / "same.txt")
            message = call.refused(**{first: same, second: same})
            assert same in message and "also the output" in message, message


@pytest.mark.parametrize("words, command", WRITERS, ids=WRITER_IDS)
def test_an_output_that_is_a_folder_or_in_a_missing_folder_is_refused(tmp_path, words, command):
    call = Call(words, command, tmp_path)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    (folder / "mine.txt").write_text("mine\n")
    for output in call.plain_writes():
        assert "is a folder" in call.refused(**{output: str(folder)})
        missing = tmp_path / "no" / "such" / "out.txt"
        assert f"no such folder {missing.parent}" in call.refused(**{output: str(missing)})
    assert (folder / "mine.txt").read_text() == "mine\n"


@pytest.mark.parametrize("words, command", WRITERS, ids=WRITER_IDS)
def test_an_output_on_a_read_only_file_system_is_refused_naming_it(tmp_path, words, command):
    call = Call(words, command, tmp_path)
    with mounted(tmp_path / "ro", "ro") as ro:
        for output in (*call.declared.writes, *call.declared.folders):
            target = str(ro / "out")
            message = call.refused(**{output: target})
            assert message.startswith(f"{call.label(output)} {target}") and "read-only file system" in message


@pytest.mark.parametrize("words, command", WRITERS, ids=WRITER_IDS)
def test_a_device_or_fifo_passes_as_an_output_file_and_is_refused_as_an_output_folder(tmp_path, words, command):
    call = Call(words, command, tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for output in call.plain_writes():
        for special in ("/dev/null", str(fifo)):
            call.guard(**{output: special})
    for output in call.declared.folders:
        with pytest.raises(MtError, match="device or a pipe"):
            call.guard(**{output: str(fifo)})


def test_the_null_device_may_take_two_outputs(tmp_path):
    call = Call(["clean"], clean, tmp_path)
    call.guard(report="/dev/null", rejected="/dev/null")


def test_clean_outputs_from_its_prefix_are_checked_against_its_inputs_and_other_outputs(tmp_path):
    call = Call(["clean"], clean, tmp_path)
    src, tgt = tmp_path / "train.de", tmp_path / "train.en"
    src.write_text("Hallo\n")
    tgt.write_text("Hello\n")
    call.values.update(src=str(src), tgt=str(tgt))
    assert "is also the input --src" in call.refused(output=str(tmp_path / "train"))
    assert "is also the output -o " in call.refused(output=str(tmp_path / "clean"),
                                                      rejected=str(tmp_path / "clean.en"))
    assert "is also the input --tgt" in call.refused(report=str(tgt))
    assert src.read_text() == "Hallo\n" and tgt.read_text() == "Hello\n"


# ---------------------------------------------------------------- mt clean's outputs: all or none


def _noisy_pairs(folder: Path) -> tuple[Path, Path]:
    """200 pairs of the shipped sample, then each of them again (duplicates) and a pair with an empty side."""
    src, tgt = [(DATA / f"sample-2k.{side}").read_text(encoding="utf-8").splitlines()[:200] for side in ("de", "en")]
    paths = folder / "noisy.de", folder / "noisy.en"
    for path, lines in zip(paths, (src + src + ["Hallo"], tgt + tgt + [""])):
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


def test_clean_writes_into_a_fifo_and_leaves_it_a_fifo(tmp_path):
    fifo = tmp_path / "rejected.fifo"
    os.mkfifo(fifo)
    src, tgt = _noisy_pairs(tmp_path)
    proc = mt_process("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "clean", "--rejected", fifo,
                      "--set", "clean.language_id=false")
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(fifo.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    _, err = proc.communicate(timeout=300)
    reader.join(timeout=10)
    if reader.is_alive():  # nothing opened the FIFO: release the reader, then fail
        fifo.write_text("")
    assert read, "mt clean never wrote into the FIFO"
    rejected = read[0]
    assert proc.returncode == 0, err
    assert rejected.count("\n") >= 201 and all(line.count("\t") >= 3 for line in rejected.splitlines())
    assert fifo.is_fifo() and (tmp_path / "clean.de").exists()


def test_clean_with_its_report_on_a_full_disk_writes_none_of_its_outputs(tmp_path):
    with mounted(tmp_path / "disk", "size=64k") as disk:
        (disk / "clean.de").write_text("old\n")
        before = snapshot(disk)
        proc = mt_process("clean", "--src", DATA / "sample-2k.de", "--tgt", DATA / "sample-2k.en", "-o",
                          disk / "clean", "--report", disk / "report.json", "--set", "clean.language_id=false")
        _, err = proc.communicate(timeout=300)
        lines = err.decode().strip().splitlines()
        assert proc.returncode == 1 and "Traceback" not in err.decode(), err
        assert lines[-1].startswith("error: ") and str(disk) in lines[-1] and ".tmp" not in lines[-1]
        assert snapshot(disk) == before


# ---------------------------------------------------------------- SIGTERM as `timeout` sends it


def _started_writing(folder: Path) -> bool:
    return any(p.name.startswith(".") for p in folder.iterdir())


def _terminate_like_timeout(proc: subprocess.Popen) -> str:
    """SIGTERM to the command, and again a moment later (timeout signals the command, then its process group)."""
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.02)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    return err.decode()


@pytest.fixture(scope="module")
def checkpoint(trained_tiny) -> Path:
    return trained_tiny / "checkpoint_last.pt"


def _long_commands(checkpoint: Path, out: Path) -> dict[str, list]:
    """The long commands, each writing into `out`'s folder, on enough text to be stopped while it works."""
    src, tgt = DATA / "train.de", DATA / "train.en"
    return {
        "translate": ["translate", "-c", checkpoint, "-i", src, "-o", out],
        "evaluate": ["evaluate", "-c", checkpoint, "--src", src, "--ref", tgt, "-o", out],
        "score": ["score", "-c", checkpoint, "--src", src, "--tgt", tgt, "-o", out],
        "clean": ["clean", "--src", src, "--tgt", tgt, "-o", out.with_suffix(""), "--report", out,
                  "--set", "clean.word_alignment=11"],
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ["translate", "evaluate", "score", "clean"])
def test_sigterm_twice_while_writing_exits_143_with_one_line_and_the_old_output_whole(tmp_path, checkpoint, name):
    out = tmp_path / "out.txt"
    out.write_text("old\n")
    proc = mt_process(*_long_commands(checkpoint, out)[name], stdin=subprocess.DEVNULL)
    working = time.monotonic() + 15  # mt evaluate keeps its hypotheses in memory until it has them all
    while not _started_writing(tmp_path) and proc.poll() is None and time.monotonic() < working:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()
    err = _terminate_like_timeout(proc)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "terminated"
    assert out.read_text() == "old\n"
    assert not _started_writing(tmp_path), sorted(os.listdir(tmp_path))


@pytest.mark.slow
def test_sigterm_twice_while_preparing_leaves_no_half_written_data(tmp_path):
    out_dir = tmp_path / "run"
    proc = mt_process("prepare", TINY, *tiny_overrides(out_dir, **{"data.train_src": DATA / "train.de",
                                                                     "data.train_tgt": DATA / "train.en"}))
    deadline = time.monotonic() + 300
    while not out_dir.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    assert proc.poll() is None
    err = _terminate_like_timeout(proc)
    assert proc.returncode == 143 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "terminated"
    data = out_dir / "data"
    assert not data.exists() or (data / "prepared.json").exists(), sorted(os.listdir(data))


def _stopped_by_two_sigterms(proc: subprocess.Popen, ready, limit_s: float = 300) -> str:
    deadline = time.monotonic() + limit_s
    while not ready() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()[1].decode()
    err = _terminate_like_timeout(proc)
    assert "Traceback" not in err, err
    return err


@pytest.mark.slow
def test_sigterm_twice_while_training_exits_143_after_saving_a_checkpoint_that_loads(tmp_path):
    from mt.checkpoint import load_checkpoint

    out = tmp_path / "run"
    proc = mt_process("train", TINY, *tiny_overrides(out, **{"train.max_steps": 100000, "train.save_every": 100000,
                                                               "data.dev_src": "null", "data.dev_tgt": "null"}))
    err = _stopped_by_two_sigterms(proc, lambda: (out / "metrics.jsonl").exists())
    assert proc.returncode == 143, err
    assert load_checkpoint(out / "checkpoint_last.pt")["step"] > 0
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_sigterm_twice_while_distilling_exits_143_with_one_line(tmp_path, checkpoint):
    import yaml

    config = {"output_dir": str(tmp_path / "student"),
              "data": {"train_src": str(DATA / "train.de"), "train_tgt": str(DATA / "train.en"), "max_len": 64},
              "tokenizer": {"vocab_size": 400}, "model": {"d_model": 32, "d_ff": 64, "n_heads": 4, "n_layers": 1},
              "train": {"max_steps": 5}, "distill": {"teachers": [str(checkpoint)], "beam_size": 2}}
    (tmp_path / "student.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    proc = mt_process("distill", tmp_path / "student.yaml")
    distilled = tmp_path / "student" / "distilled"
    err = _stopped_by_two_sigterms(proc, lambda: distilled.exists() and any(distilled.glob("*.partial")))
    assert proc.returncode == 143 and err.strip().splitlines()[-1] == "terminated", err


@pytest.fixture(scope="module")
def export_files(checkpoint, tmp_path_factory) -> list[str]:
    """The names of the files a finished export of `checkpoint` holds."""
    out = tmp_path_factory.mktemp("reference") / "exported"
    run_mt("export", "-c", checkpoint, "-o", out)
    return sorted(p.name for p in out.iterdir())


@pytest.mark.slow
def test_sigterm_twice_while_exporting_leaves_the_export_whole_or_absent(tmp_path, checkpoint, export_files):
    out = tmp_path / "exported"
    proc = mt_process("export", "-c", checkpoint, "-o", out)
    while not _started_writing(tmp_path) and proc.poll() is None:
        time.sleep(0.01)
    err = _terminate_like_timeout(proc) if proc.poll() is None else proc.communicate()[1].decode()
    assert "Traceback" not in err, err
    assert proc.returncode == 0 or (proc.returncode == 143 and err.strip().splitlines()[-1] == "terminated"), err
    if out.exists():  # it was put in place before the signal (or finished first): then it is whole
        assert sorted(p.name for p in out.iterdir()) == export_files
    else:
        assert proc.returncode == 143, err
    assert not _started_writing(tmp_path), sorted(os.listdir(tmp_path))


# ---------------------------------------------------------------- inputs that are pipes


@dataclasses.dataclass
class RealCall:
    """A call of a command that does its work on small real inputs: the file each of its reads names (`values`),
    its other arguments (outputs under the folder it was made for), for a server the line that says it is ready
    (it is then stopped), and whether its stdout is the same from run to run (a benchmark's is not)."""

    words: list[str]
    values: dict[str, Path]
    others: list = dataclasses.field(default_factory=list)
    ready: str | None = None
    same_output: bool = True

    def args(self, **changes) -> list[str]:
        parameters, args = _parameters(_command(self.words)), list(self.words)
        for name, path in {**self.values, **changes}.items():
            value = f"de:en={path}" if name == "model" else str(path)
            args += [value] if _is_argument(parameters[name]) else [option_label(parameters[name]), value]
        return [*args, *map(str, self.others)]


def _command(words: list[str]):
    return next(command for found, command in COMMANDS if found == words)


@pytest.fixture(scope="module")
def real_inputs(checkpoint, trained_tiny, tmp_path_factory) -> dict[str, Path]:
    """Small real files of each kind a command reads: a corpus, a config that prepares, trains, distills and
    cleans in seconds, the checkpoint, a key file, a sentence splitter, a run folder and an Argos package."""
    folder = tmp_path_factory.mktemp("real-inputs")
    files = {"checkpoint": checkpoint, "run": trained_tiny}
    for side in ("de", "en"):
        for name, source, lines in (("corpus", "sample-2k", 200), ("dev", "dev", 10)):
            text = (DATA / f"{source}.{side}").read_text(encoding="utf-8").splitlines(keepends=True)[:lines]
            files[f"{name}.{side}"] = folder / f"{name}.{side}"
            files[f"{name}.{side}"].write_text("".join(text), encoding="utf-8")
    config = {"output_dir": str(folder / "unused"),
              "data": {"train_src": str(files["corpus.de"]), "train_tgt": str(files["corpus.en"]),
                       "dev_src": str(files["dev.de"]), "dev_tgt": str(files["dev.en"]), "max_len": 64},
              "tokenizer": {"vocab_size": 400},
              "model": {"d_model": 32, "d_ff": 64, "n_heads": 4, "n_layers": 1, "max_positions": 128},
              "train": {"max_steps": 2, "batch_tokens": 1024, "warmup_steps": 1, "eval_every": 2, "save_every": 2},
              "decode": {"max_len_a": 0.5, "max_len_b": 4},
              "distill": {"teachers": [str(trained_tiny / "checkpoint_30.pt")],  # its last one writes empty lines
                          "beam_size": 2, "batch_lines": 40},
              "clean": {"language_id": False}}
    files["config"] = folder / "small.yaml"
    files["config"].write_text(yaml.safe_dump(config), encoding="utf-8")
    files["keys"] = folder / "keys.txt"
    files["keys"].write_text("key-1 60\n")
    files["splitter"] = folder / "de.onnx"  # argostranslate's MiniSBD model; the export packs it as it is
    files["splitter"].write_bytes(b"\x08\x07onnx bytes\n")
    files["reference"] = tmp_path_factory.mktemp("reference-runs")
    files["package"] = folder / "de_en.argosmodel"
    run_mt("export", "-c", checkpoint, "--format", "argos", "-o", files["package"])
    files["memory"] = folder / "memory.tmx"
    pairs = zip(*(files[f"dev.{side}"].read_text(encoding="utf-8").splitlines() for side in ("de", "en")))
    files["memory"].write_text('<tmx version="1.4"><body>' + "".join(
        f'<tu><tuv xml:lang="de"><seg>{escape(de)}</seg></tuv><tuv xml:lang="en"><seg>{escape(en)}</seg></tuv></tu>'
        for de, en in pairs) + "</body></tmx>", encoding="utf-8")
    files["suggestions"] = folder / "suggestions.db"
    Suggestions(files["suggestions"]).add("Hallo Welt", "Hello world", "de", "en")
    return files


def _real_calls(inputs: dict[str, Path], out: Path) -> list[RealCall]:
    """At least one real call of every command that reads a file, each writing under `out`."""
    ckpt, src, ref, config = inputs["checkpoint"], inputs["dev.de"], inputs["dev.en"], inputs["config"]
    output_dir = ["--set", f"output_dir={out / 'run'}"]
    return [
        RealCall(["prepare"], {"config": config}, output_dir),
        RealCall(["train"], {"config": config}, output_dir),
        RealCall(["distill"], {"config": config}, output_dir),
        RealCall(["bench", "train"], {"config": config}, [*output_dir, "--steps", "1", "--warmup", "0"],
                 same_output=False),
        RealCall(["clean"], {"src": inputs["corpus.de"], "tgt": inputs["corpus.en"], "config": config},
                 ["-o", out / "clean", "--src-lang", "de", "--tgt-lang", "en"]),
        RealCall(["translate"], {"checkpoint": ckpt, "input": src}),
        RealCall(["translate"], {"checkpoint": ckpt, "input": src, "memory": inputs["memory"]}),
        RealCall(["evaluate"], {"checkpoint": ckpt, "src": src, "ref": ref}),
        RealCall(["evaluate"], {"hyp": src, "ref": ref}),
        RealCall(["score"], {"checkpoint": ckpt, "src": src, "tgt": ref}),
        RealCall(["average"], {"checkpoints": ckpt}, ["-o", out / "average.pt"]),
        RealCall(["serve"], {"model": ckpt, "api_keys": inputs["keys"], "memory": inputs["memory"],
                             "suggestions": inputs["suggestions"]}, ["--port", "0"], ready="ready at"),
        RealCall(["suggestions", "export"], {"database": inputs["suggestions"]}, ["-o", out / "suggestions.tmx"]),
        RealCall(["adapt"], {"checkpoint": ckpt, "corrections": inputs["memory"], "dev_src": src, "dev_ref": ref,
                             "replay_src": inputs["corpus.de"], "replay_tgt": inputs["corpus.en"]},
                 ["-o", out / "adapted.pt", "--src-lang", "de", "--tgt-lang", "en", "--steps", "1"]),
        RealCall(["export"], {"checkpoint": ckpt, "sentence_splitter": inputs["splitter"]},
                 ["--format", "argos", "-o", out / "de_en.argosmodel"]),
        RealCall(["import"], {"source": inputs["package"]}, ["-o", out / "imported.pt"]),
        RealCall(["info"], {"path": config}),
        RealCall(["plot", "attention"], {"checkpoint": ckpt}, ["--text", "Hallo Welt", "-o", out / "a.png"]),
        RealCall(["plot", "curves"], {"run_dirs": inputs["run"]}, ["-o", out / "curves.png"]),
    ]


# Every input of every command, as a FIFO and as /dev/stdin.
PIPED = [(words, name, pipe) for words, command in COMMANDS for name in command.files.reads
         for pipe in ("fifo", "stdin")]


def _feed(fifo: Path, data: bytes) -> threading.Thread:
    """A thread that writes `data` into `fifo` once, when a reader opens it, then closes it: a second opening
    finds no writer and waits, as it would on `<(zcat corpus.gz)`."""
    def write():
        with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as f:
            f.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def _release(fifo: Path, writer: threading.Thread) -> None:
    """Let the writer finish if the command never opened the FIFO (it refused it)."""
    writer.join(timeout=1)
    if writer.is_alive():
        with open(fifo, "rb") as f:
            f.read()
        writer.join()


def _until_ready(proc: subprocess.Popen, ready: str, timeout: float) -> str:
    """A server's stderr until it prints `ready` (then it is stopped with SIGTERM) or ends."""
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.decode() for line in proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while not any(ready in line for line in lines) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if proc.poll() is None and not any(ready in line for line in lines):
        raise subprocess.TimeoutExpired(proc.args, timeout)
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    reader.join(timeout=10)
    return "".join(lines)


def _finished(call: RealCall, args: list[str], stdin: bytes | None, timeout: float = 300) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the real command; a command that does not end fails the test."""
    proc = mt_process(*args, stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE)
    try:
        if call.ready:
            if stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.write(stdin)
                proc.stdin.close()
            err = _until_ready(proc, call.ready, timeout)
            return proc.returncode, "", err
        out, err = proc.communicate(stdin, timeout=timeout)
        return proc.returncode, out.decode(), err.decode()
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"mt {' '.join(args)}: did not end in {timeout} s (it opens a pipe again, or waits on it)")


_REFERENCES: dict[tuple, tuple[int, str, str]] = {}


def _reference(inputs: dict[str, Path], words: list[str], index: int) -> tuple[int, str, str]:
    """The result of the `index`th real call of `words` with every input a file (once in the module)."""
    key = (tuple(words), index)
    if key not in _REFERENCES:
        out = inputs["reference"] / f"{'-'.join(words)}-{index}"
        out.mkdir()
        call = [c for c in _real_calls(inputs, out) if c.words == words][index]
        _REFERENCES[key] = _finished(call, call.args(), None)
        assert _REFERENCES[key][0] == 0, _REFERENCES[key][2]
    return _REFERENCES[key]


def _piped(given: Path, read: Path, pipe: str, folder: Path) -> tuple[Path, Path]:
    """(what to give, the pipe it reads): a FIFO, or a link to /dev/stdin; where `given` is a folder whose file
    `read` is read (plot curves RUN_DIR: its metrics.jsonl), a copy of it with the pipe in place of that file."""
    if read == given:
        target = folder / given.name
        folder.mkdir()
    else:
        shutil.copytree(given, folder / given.name, ignore=lambda where, names: [read.name] * (read.name in names))
        target = folder / given.name / read.relative_to(given)
    if pipe == "fifo":
        os.mkfifo(target)
        return (target if read == given else folder / given.name), target
    if read == given:
        return Path("/dev/stdin"), Path("/dev/stdin")
    target.symlink_to("/dev/stdin")
    return folder / given.name, target


@pytest.mark.slow
@pytest.mark.parametrize("words, name, pipe", PIPED, ids=[f"{' '.join(w)} {n} {p}" for w, n, p in PIPED])
def test_every_input_may_be_a_pipe_read_once_or_is_refused_before_any_work(real_inputs, tmp_path, words, name,
                                                                            pipe):
    """Each input a pipe that gives its file's bytes once: the command reads it once, to the same result as from
    the file, or refuses it in one line before any work where it seeks in it (mt/cli/'s `files(seeks=...)`)."""
    command, out = _command(words), tmp_path / "out"
    out.mkdir()
    calls = [call for call in _real_calls(real_inputs, out) if call.words == words]
    index = next((i for i, call in enumerate(calls) if name in call.values), None)
    assert index is not None, f"mt {' '.join(words)}: no real call reads {name}; add one to _real_calls"
    call, expand = calls[index], dict(command.files.expand).get(name)
    given = Path(call.values[name])
    read = Path(expand([str(given)], {})[0]) if expand else given
    data = read.read_bytes()
    expected = None if name in command.files.seeks or call.ready else _reference(real_inputs, words, index)
    path, shown = _piped(given, read, pipe, tmp_path / "pipe")
    writer = _feed(shown, data) if pipe == "fifo" else None
    try:
        code, output, err = _finished(call, call.args(**{name: path}), data if pipe == "stdin" else None)
    finally:
        if writer is not None:
            _release(shown, writer)
    label = option_label(_parameters(command)[name])
    if name in command.files.seeks:
        assert code == 1 and err.strip().splitlines() == [
            f"error: {label} {shown}: is a pipe or a device, but mt seeks in this input or reads it more than once; "
            "save it to a file and give that"], err
    elif call.ready:
        assert call.ready in err and "Traceback" not in err, err
    else:
        assert "Traceback" not in err and code == expected[0], err
        assert output == expected[1] or not call.same_output, f"{label} from a {pipe}: not the file's output\n{err}"
