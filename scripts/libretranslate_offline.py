"""argostranslate and LibreTranslate without the network, for the tests and the scripts: run with the Python of a
LibreTranslate install (the Makefile's .venv-lt), in an install of its own under HOME (`environment`, `call`).

    python scripts/libretranslate_offline.py install PACKAGE.argosmodel ...
    python scripts/libretranslate_offline.py translate SRC TGT < lines     (one translation a line)
    python scripts/libretranslate_offline.py serve [libretranslate's options]

argostranslate splits sentences with MiniSBD, whose model it downloads at first use unless the package holds
one; here a regular expression replaces it: a sentence ends after `.`, `!` or `?` before white space. Packages
go where ARGOS_PACKAGES_DIR says.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

PYTHON = Path(__file__).resolve().parents[1] / ".venv-lt" / "bin" / "python"


def environment(home: Path) -> dict:
    """This process's environment for a LibreTranslate install of its own: its packages, data, settings and
    caches under `home`, and no PYTHONPATH of mt's."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HOME=str(home), XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "config"),
               XDG_CACHE_HOME=str(home / "cache"), ARGOS_PACKAGES_DIR=str(home / "packages"))
    return env


def call(home: Path, *args, input: str | None = None, python: Path = PYTHON, timeout: float = 300) -> str:
    """What this script prints for `args`, run by `python` in the install under `home`."""
    if not python.exists():
        raise RuntimeError(f"no {python}: `make setup` installs LibreTranslate there")
    proc = subprocess.run([str(python), __file__, *map(str, args)], input=input, capture_output=True, text=True,
                          env=environment(home), timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"libretranslate_offline.py {args[0]} failed:\n{proc.stderr[-2000:]}")
    return proc.stdout


def split_sentences(self, text):
    parts = [p for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()]
    return parts or [text]


def main(command: str, args: list[str]) -> None:
    import argostranslate.sbd as sbd  # here: the module is imported by mt's Python too, for `call`

    sbd.MiniSBDSentencizer.split_sentences = split_sentences
    if command == "install":
        import argostranslate.package as package

        for path in args:
            package.install_from_path(Path(path))
    elif command == "translate":
        import argostranslate.translate as translate

        translation = translate.get_translation_from_codes(args[0], args[1])
        for line in sys.stdin.read().splitlines():
            print(translation.translate(line), flush=True)
    elif command == "serve":
        import libretranslate.init

        # With fewer than two packages installed, LibreTranslate's start fetches its model index, then MiniSBD's
        # models: offline, that is minutes of retries for nothing.
        libretranslate.init.boot = lambda *args, **kwargs: None
        from libretranslate.main import main as serve

        sys.argv = ["libretranslate", *args]
        serve()
    else:
        sys.exit(f"usage: {sys.argv[0]} install|translate|serve ...")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
