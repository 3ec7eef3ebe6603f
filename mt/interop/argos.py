"""Argos packages, the models LibreTranslate serves: `mt export --format argos` writes one, `mt import` reads one.

A package (.argosmodel) is a zip of one folder: model/ (a CTranslate2 model), sentencepiece.model (one model
for both sides: Argos encodes the source and decodes the target with it), metadata.json (type, languages,
versions), README.md, and optionally minisbd/<lang>.onnx, the sentence splitter argostranslate uses (without
it, argostranslate 1.10 and later download MiniSBD's model for the source language at first use). Archives are
read with limits on members, sizes and compression ratio, and names that would leave the folder are refused.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import torch

from mt.data.language_id import known_languages
from mt.documents.archives import check_members
from mt.errors import MtError
from mt.atomic_files import atomic_write, is_special, read_json_object
from mt.interop.ctranslate2 import export_ctranslate2

DEFAULT_QUANTIZATION = "int8"  # what LibreTranslate's own packages hold
ARGOS_VERSION = "1.9"  # the package format argostranslate 1.9 and later read (metadata.json's argos_version)
REQUIRED = ("type", "from_code", "to_code")
ARGOS_CODES = {"pb", "zt"}  # Argos's own codes, beside ISO 639: Portuguese (Brazil), Chinese (traditional)
LANGUAGE_NAMES = {"ar": "Arabic", "cs": "Czech", "de": "German", "en": "English", "es": "Spanish",
                  "fi": "Finnish", "fr": "French", "it": "Italian", "ja": "Japanese", "nl": "Dutch", "pl": "Polish",
                  "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "tr": "Turkish",
                  "uk": "Ukrainian", "zh": "Chinese"}


def export_argos(checkpoint: Path, output: Path, source_lang: str | None = None, target_lang: str | None = None,
                 version: str = "1.0", quantization: str | None = DEFAULT_QUANTIZATION, force: bool = False,
                 raw_weights: bool = False, sentence_splitter: Path | None = None) -> tuple[Path, str, str]:
    """Write the package `output` (complete or absent); returns it and the (source, target) languages."""
    ckpt = torch.load(checkpoint, map_location="cpu", weights_only=True)
    if ckpt["config"].get("languages", {}).get("token", "none") != "none":
        raise MtError(f"-c {checkpoint}: a multilingual model, told its languages by a token before the source, "
                      "which argostranslate cannot add (it adds only a target prefix); package a bilingual student "
                      "of one direction (mt distill), or export to ctranslate2 or huggingface")
    src, tgt = _languages(ckpt["config"], source_lang, target_lang, checkpoint)
    if not torch.equal(ckpt["src_tokenizer"], ckpt["tgt_tokenizer"]):
        raise MtError(f"-c {checkpoint}: its source and target sentencepiece models differ; an Argos package "
                      "holds one for both sides (train with tokenizer.joint: true)")
    _check_replaceable(output, force)
    if not output.parent.is_dir():
        raise MtError(f"-o {output}: no such folder {output.parent}")
    if sentence_splitter is not None and sentence_splitter.suffix != ".onnx" and not is_special(sentence_splitter):
        raise MtError(f"--sentence-splitter {sentence_splitter}: not a MiniSBD model (.onnx)")
    try:
        _write_package(checkpoint, ckpt, output, f"translate-{src}_{tgt}-{version.replace('.', '_')}",
                       {"package_version": version, "argos_version": ARGOS_VERSION, "from_code": src,
                        "from_name": LANGUAGE_NAMES.get(src, src), "to_code": tgt,
                        "to_name": LANGUAGE_NAMES.get(tgt, tgt), "type": "translate", "links": []},
                       quantization, raw_weights, sentence_splitter)
    except (OSError, MtError) as e:  # a full disk while writing the temporary folder names that folder: name -o
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e).rsplit(": ", 1)[-1]
        raise MtError(f"-o {output}: {reason}") from None
    return output, src, tgt


def _write_package(checkpoint: Path, ckpt: dict, output: Path, name: str, metadata: dict, quantization: str | None,
                   raw_weights: bool, sentence_splitter: Path | None) -> None:
    """The package folder `name`, built in a temporary folder beside `output`, zipped into `output` atomically."""
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=f".{output.name}.") as tmp:
        folder = Path(tmp) / name
        folder.mkdir()
        export_ctranslate2(checkpoint, folder / "model", quantization, raw_weights=raw_weights)
        (folder / "sentencepiece.model").write_bytes((folder / "model" / "source.spm").read_bytes())
        (folder / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        (folder / "README.md").write_text(_readme(ckpt, metadata["from_code"], metadata["to_code"], quantization),
                                          encoding="utf-8")
        if sentence_splitter is not None:
            (folder / "minisbd").mkdir()
            (folder / "minisbd" / f"{metadata['from_code']}.onnx").write_bytes(sentence_splitter.read_bytes())
        atomic_write(output, lambda f: _zip(folder, f))


def _languages(config: dict, source: str | None, target: str | None, checkpoint: Path) -> tuple[str, str]:
    """The given languages, else data.src_lang/tgt_lang, else the training files' extensions (train.de). A given
    one is a language code, and the model's own where it names one."""
    data = config.get("data", {})
    found = []
    for given, side, option in ((source, "src", "--source-lang"), (target, "tgt", "--target-lang")):
        own, where = _own_language(data, f"{side}_lang", f"train_{side}")
        if given is not None and given not in ARGOS_CODES and given not in known_languages():
            raise MtError(f"{option} {given}: not a language code; an Argos package names its languages by ISO "
                          f"639 codes (de, en, zh) or Argos's own ({', '.join(sorted(ARGOS_CODES))})")
        if given is not None and own is not None and given != own:
            raise MtError(f"{option} {given}: the model's {'source' if side == 'src' else 'target'} language is "
                          f"{own} ({where}); leave {option} out, or give {own}")
        lang = given or own
        if not lang:
            raise MtError(f"-c {checkpoint}: does not say its languages; give {option}")
        found.append(lang)
    return found[0], found[1]


def _own_language(data: dict, lang_key: str, file_key: str) -> tuple[str | None, str]:
    """(a side's language as the model's config names it, where): data.src_lang, else the extension of the
    training file where it is a language code (train.de; not train.txt)."""
    if data.get(lang_key):
        return data[lang_key], f"data.{lang_key}"
    extension = Path(data.get(file_key) or "").suffix.lstrip(".")
    if extension in known_languages() or extension in ARGOS_CODES:
        return extension, f"data.{file_key} {data[file_key]}"
    return None, ""


def _check_replaceable(output: Path, force: bool) -> None:
    """A new file, or with `force` an earlier package (a zip holding metadata.json), never anything else."""
    if output.is_dir():
        raise MtError(f"-o {output}: is a folder; an Argos package is one file (.argosmodel)")
    if not output.exists():
        return
    if not force:
        raise MtError(f"-o {output}: exists; remove it or pass --force")
    try:
        with zipfile.ZipFile(output) as z:
            if any(Path(n).name == "metadata.json" for n in z.namelist()):
                return
    except (OSError, zipfile.BadZipFile):
        pass
    raise MtError(f"-o {output}: is not an Argos package; --force replaces only an earlier package")


def _zip(folder: Path, file) -> None:
    with zipfile.ZipFile(file, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            z.write(path, path.relative_to(folder.parent).as_posix())


def _readme(ckpt: dict, src: str, tgt: str, quantization: str | None) -> str:
    cfg, m = ckpt["config"], ckpt["config"]["model"]
    data = cfg.get("data", {})
    corpora = [f"{data.get('train_src')} / {data.get('train_tgt')}"] if data.get("train_src") else \
        [str(c) for c in data.get("train") or []] or ["(not recorded)"]
    metric = cfg.get("train", {}).get("best_metric", "bleu")
    score = ckpt.get("best_score")
    dev = f"{metric} {score:.2f} on {data.get('dev_src')} at step {ckpt.get('best_step')}" \
        if score is not None else "not recorded (the checkpoint holds no validation score)"
    return (f"# {LANGUAGE_NAMES.get(src, src)} to {LANGUAGE_NAMES.get(tgt, tgt)} ({src}-{tgt})\n\n"
            f"Trained with mt (a Transformer as in Vaswani et al. 2017) for {ckpt.get('step')} updates on "
            f"{', '.join(corpora)}.\n\n"
            f"- Model: {m['encoder_layers']}+{m['decoder_layers']} layers, d_model {m['d_model']}, d_ff {m['d_ff']}, "
            f"{m['n_heads']} heads, {m['norm']}-norm, {m['activation']}\n"
            f"- Dev score: {dev}\n"
            f"- Weights: CTranslate2, {quantization or 'float32'}\n")


@contextlib.contextmanager
def opened_package(path: Path) -> Iterator[tuple[Path, dict]]:
    """(the package folder, its metadata) of an .argosmodel file (unpacked into a temporary folder for the
    duration) or of an installed package's folder; only translation packages are accepted."""
    if path.is_dir():
        yield path, _metadata(path, path)
        return
    with tempfile.TemporaryDirectory(prefix="mt-argos-") as tmp:
        folder = _unpack(path, Path(tmp))
        try:
            yield folder, _metadata(folder, path)
        except (MtError, OSError) as e:  # a damaged member, named by the temporary folder: name it in the archive
            raise MtError(_in_archive(e, Path(tmp), path)) from None


def _in_archive(error: MtError | OSError, tmp: Path, archive: Path) -> str:
    """`error`'s message with the temporary folder's paths as the member of `archive` they were unpacked from."""
    if isinstance(error, OSError):
        error = MtError(f"{error.filename}: {error.strerror or error}" if error.filename else str(error))
    return str(error).replace(f"{tmp}{os.sep}", f"{archive}: ")


def _unpack(archive: Path, into: Path) -> Path:
    try:
        z = zipfile.ZipFile(archive)
    except zipfile.BadZipFile:
        raise MtError(f"{archive}: not a zip archive, so not an Argos package (.argosmodel)") from None
    except OSError as e:
        raise MtError(f"{archive}: cannot read ({e.strerror})") from None
    with z:
        members = z.infolist()
        check_members(archive, members)
        tops = {m.filename.split("/", 1)[0] for m in members}
        if len(tops) != 1:
            raise MtError(f"{archive}: holds {len(tops)} top-level entries; an Argos package is one folder")
        try:
            z.extractall(into)
        except (zipfile.BadZipFile, RuntimeError, OSError, EOFError) as e:
            raise MtError(f"{archive}: damaged or encrypted ({e})") from None
    return into / tops.pop()


def _metadata(folder: Path, shown: Path) -> dict:
    """The package's metadata.json, checked; messages name `shown` (the archive, or the folder given)."""
    path = folder / "metadata.json"
    if not path.is_file():
        raise MtError(f"{shown}: no metadata.json, so not an Argos package")
    name = f"{shown}: metadata.json" if shown != folder else str(path)
    metadata = read_json_object(path, name)
    metadata.setdefault("type", "translate")  # argostranslate's default
    missing = [key for key in REQUIRED if not isinstance(metadata.get(key), str) or not metadata[key]]
    if missing:
        raise MtError(f"{name}: no {missing[0]}; an Argos translation package names {', '.join(REQUIRED[1:])}")
    if metadata["type"] != "translate":
        raise MtError(f"{name}: a package of type {metadata['type']!r}; mt imports translation packages "
                      "(type 'translate')")
    if not (folder / "model" / "model.bin").is_file():
        raise MtError(f"{shown}: no model/model.bin; an Argos translation package holds a CTranslate2 model there")
    return metadata
