"""argostranslate and LibreTranslate without the network, for the tests and scripts/bench_serve.py: run with the
Python of a LibreTranslate install (the Makefile's .venv-lt).

    python scripts/libretranslate_offline.py install PACKAGE.argosmodel ...
    python scripts/libretranslate_offline.py translate SRC TGT < lines     (one translation a line)
    python scripts/libretranslate_offline.py serve [libretranslate's options]

argostranslate splits sentences with MiniSBD, whose model it downloads at first use unless the package holds
one; here a regular expression replaces it: a sentence ends after `.`, `!` or `?` before white space. Packages
go where ARGOS_PACKAGES_DIR says.
"""

import re
import sys
from pathlib import Path

import argostranslate.sbd as sbd


def split_sentences(self, text):
    parts = [p for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()]
    return parts or [text]


def main(command: str, args: list[str]) -> None:
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
