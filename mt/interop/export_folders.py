"""The folders `mt export` writes, one kind per format, and which existing folder `--force` may replace: an empty
one, or an earlier export of either format (so `--format huggingface --force` replaces a CTranslate2 export and
the other way round), never a folder holding a file mt export did not write.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mt.decoding.ct2_backend import MARKER
from mt.errors import MtError

CARD_SIGN = "written by `mt export --format huggingface`"  # in the model card (README.md) of a Hugging Face export


@dataclass(frozen=True)
class ExportKind:
    files: frozenset[str]  # every file an export of this format writes
    is_export: Callable[[Path], bool]  # whether a folder says it is one


def _has_marker(folder: Path) -> bool:
    return (folder / MARKER).is_file()


def is_hf_export(folder: Path) -> bool:
    try:
        return CARD_SIGN in (folder / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False


# CTranslate2 names its vocabularies .json, older releases .txt.
CTRANSLATE2 = ExportKind(frozenset({MARKER, "model.bin", "config.json", "source.spm", "target.spm",
                                    *(f"{side}_vocabulary.{ext}" for side in ("shared", "source", "target")
                                      for ext in ("json", "txt"))}), _has_marker)
HUGGINGFACE = ExportKind(frozenset({"config.json", "generation_config.json", "model.safetensors", "README.md",
                                    "tokenizer.json", "source.spm", "target.spm", "vocab.json", "target_vocab.json",
                                    "tokenizer_config.json"}), is_hf_export)
KINDS = (CTRANSLATE2, HUGGINGFACE)


def check_replaceable(output_dir: Path, force: bool) -> None:
    """Before any work: `output_dir` is new, or (with `force`) empty or an earlier export of either format (as
    its marker or model card tells), holding only files that format writes; never a folder of anyone else's."""
    if not output_dir.exists():
        return
    if not output_dir.is_dir():
        raise MtError(f"-o {output_dir}: exists and is not a folder; an export writes a folder")
    if not force:
        raise MtError(f"{output_dir} exists; remove it or pass --force")
    entries = sorted(output_dir.iterdir())
    if not entries:
        return
    kind = next((kind for kind in KINDS if kind.is_export(output_dir)), None)
    written = kind.files if kind else frozenset().union(*(k.files for k in KINDS))
    foreign = [p.name for p in entries if p.name not in written or not p.is_file() or p.is_symlink()]
    if foreign or kind is None:
        what = f"holds {foreign[0]}, which" if foreign else "is not an earlier export: its files"
        raise MtError(f"-o {output_dir}: {what} mt export did not write; --force replaces only an earlier "
                      "export: choose another folder")
