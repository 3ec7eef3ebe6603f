"""`mt clean`: each filter on pairs it must remove and keep, the outputs in order and complete, the report,
bounded memory, `data.clean` in `mt prepare`, and the bad inputs (mt/data/clean.py, mt/data/clean_filters.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import DATA, TINY, run_mt, small_dev, tiny_overrides
from mt.data import clean_filters as f
from mt.data.clean import Cleaner, SeenHashes
from mt.data.misalignment import misaligned, misaligned_share, threshold
from mt.data.clean_filters import Pair
from mt.config import CleanConfig, load_config
from mt.errors import ConfigError
from mt.data.language_id import check_language, detect_language, detect_languages, known_languages

C = CleanConfig()
# the defaults, and the filters they leave off on (with the values of the pipelines they come from)
ON = CleanConfig(urls=True, numbers=1.0, punctuation=-2.0, min_alpha_words=0.4, min_alpha_chars=0.5)

# (filter, pairs it must remove, pairs it must keep), German source, English target
CASES = [
    (f.empty, [("", "Hello"), ("Hallo", "  \t")], [("Hallo", "Hello")]),
    (f.length, [("Wort " * 151, "word " * 151), ("a" * 1001, "b b"), ("x" * 151 + " y", "x y")],
     [("Wort " * 150, "word " * 150), ("Hallo Welt", "Hello world")]),
    (f.length_ratio, [("eins", "one two three four"), ("Ein Programm zum Lesen und Schreiben von Bildern", "A tool")],
     [("ein kleines Programm", "a small program"), ("Zeichensatzübersetzer", "character set translator"),
      ("Ethernet/FDDI-Aktivitätsmonitor", "Ethernet/FDDI station activity monitor")]),  # 1 word against 4
    (f.copies, [("Die Katze schläft auf dem Sofa", "die Katze schläft auf dem Sofa"),
                ("Dieses Paket ist leer ", "dieses Paket ist leer")],
     [("Hallo Welt", "Hello world"), ("GNU Emacs", "gnu emacs"), ("IP Version 6", "IP version 6"),
      ("Lightweight Window Manager", "lightweight window manager"), ("Threads,", "threads,")]),  # names, terms
    (f.encoding, [("Grüße\x07", "Greetings"), ("Gr\ufffdße", "Greetings"), ("GrÃ¼ÃŸe aus KÃ¶ln", "Greetings"),
                  ("Hallo", "donâ€™t"),
                  ("Status von imhangul\ufffd (GTK+ 2 Eingabemodul)", "status of imhangul (GTK+ 2)")],
     [("Grüße aus Köln", "Greetings from Cologne"), ("Ärger über Öl", "trouble with oil"), ("a\tb", "a\tb"),
      ("Tofu ist Jargon für das Ersetzungszeichen »\ufffd« (U + FFFD)",  # quoted on both sides: text
       "Tofu is jargon for unicode replacement character \"\ufffd\" (U+FFFD)")]),
    (f.html, [("<p>Hallo</p>", "Hello"), ("Hallo &amp; Tschüss", "Hello and bye"),
              ('<div class="x">Text', "Text"), ("Erste Zeile<br/>zweite", "First line<br/>second")],
     [("Hallo <Name>", "Hello <name>"), ("a < b und c > d", "a < b and c > d"),
      ("Dezimales &lt; &gt; Hexadezimalkonverter.", "Decimal &lt;–&gt; Hexadecimal converter."),  # escaped alike
      ("Im Kern besteht diese aus <brl>-Teilbäumen und einigen <meta>-Tags.",  # tags named, not markup
       "This consists essentially of <brl> subtrees, plus some <meta> tags.")]),
    (f.urls, [("Siehe https://example.org/a", "See https://example.com/a"), ("Siehe www.debian.org", "See")],
     [("Siehe https://example.org/a.", "See https://example.org/a"), ("Kein Link", "No link")]),
    (f.numbers, [("Version 3 von 2019", "version 4 of 2020"), ("100 Euro", "200 euros")],
     [("Version 3 von 2019", "version 3 of 2019"), ("1.000,5 Meter", "1,000.5 metres"), ("Ohne", "Without")]),
    (f.changed_numbers, [("Version 3 von 2019", "version 4 of 2019"), ("libxine1-Erweiterungen", "libxine2 plugins"),
                         ("Unterstützt IEEE1394", "Supports IEEE1384"),
                         ("für Commodore 13/Plus 4", "for Commodore 16/Plus 4"),
                         ("Linux 2.1.15", "Linux 2.1.25")],
     [("Version 3 von 2019", "version 3 of 2019"), ("fünf Dateien, 3 Ordner", "five files, 3 folders"),
      ("fünf Dateien, 3 Ordner", "5 files, 3 folders"),  # a number as a word: counts differ, kept
      ("1.000,5 Meter", "1,000.5 metres"), ("12 784 Wörter", "12,784 words"), ("0,005 s", ".005 s"),
      ("Jahr-2000-kompatibel", "Y2K-compliant"), ("in den 40er Jahren", "in the 1940s"), ("PAR-2.0", "PAR2"),
      ("Python-3-Anbindung für Qt", "Python bindings for Qt5"),  # a number of a word against a number alone
      ("Ohne", "Without")]),
    (f.punctuation, [("Eins. Zwei. Drei. Vier.", "One two three four"), ("Was?!?!", "What")],
     [("Hallo Welt.", "Hello world."), ("Hallo", "Hello")]),
    (f.script_ratio, [("12345 67890 ###", "numbers"), ("Hallo", "Привет мир")],
     [("Hallo Welt 2024", "Hello world 2024"), ("Windows 7 ;", "Windows 7"),  # both short of letters: kept
      ("Perl-Erweiterung für SHA-1/224/256/384/512", "Perl extension for SHA-1/224/256/384/512")]),
    (f.language, [("This English sentence was left untranslated on the German side of the pair.",
                   "The German side holds an English sentence."),
                  ("Dieses Paket enthält die Dokumentation.",  # a German sentence on the English side
                   "Dieses Werkzeug zeigt die Temperatur aller Festplatten im Rechner an."),
                  ("Das ist ein deutscher Satz.",
                   "C'est une phrase française du côté anglais, pas une phrase anglaise.")],
     [("Das ist ein deutscher Satz über Sprachen.", "This is an English sentence about languages.")]),
]


@pytest.mark.parametrize("check,remove,keep", CASES, ids=[c[0].__name__ for c in CASES])
def test_each_filter_removes_its_noise_and_keeps_clean_pairs(check, remove, keep):
    for src, tgt in remove:
        assert check(Pair(src, tgt, "de", "en"), ON), (src, tgt)
    for src, tgt in keep:
        assert not check(Pair(src, tgt, "de", "en"), ON), (src, tgt)


# Pairs of the shipped corpora that lid.176 puts in another language (most probable), all good translations:
# package names, commands, short technical lines. The language filter must keep what it cannot judge.
UNJUDGED = [
    ("de", "en", "Portierbares C++-Multi-Threading", "portable C++ multi-threading"),
    ("de", "en", "Perl-Modul File::Tail", "File::Tail perl module"),
    ("de", "en", "Java-artige Eigenschaften (d.h. java -Djava.awt.headless=true Foo)",
     "Java like properties (ie. java -Djava.awt.headless=true Foo)"),
    ("de", "en", "Spektrumanalysator", "Spectrum analyser"),
    ("de", "en", "Bayessche Inferenz der Phylogenie", "Bayesian Inference of Phylogeny"),
    ("de", "en", "Statgrab verwendet die Bibliothek Libstatgrab.", "statgrab utilizes libstatgrab library."),
    ("de", "en", "TeX Live: Dokumentationsdateien für texlive-latex-base",
     "TeX Live: Documentation files for texlive-latex-base"),
    ("de", "en", "Qt-5-Modul für XML-Strukturen", "Qt 5 XML patterns module"),
    ("de", "en", "Lightweight Window Manager", "lightweight window manager"),
    ("de", "en", "ein Syntaxanalysator für XML,", "a parser for XML,"),  # English: 0.84 French
    ("de", "en", "Mit diesen Modulen kann sich PulseAudio mit einem jackd-Daemon verbinden.",
     "These modules enables PulseAudio to connect to a jackd daemon."),  # English: 0.41 Esperanto, 0.02 English
    ("fr", "en", "Noto Sans Gujarati UI Condensed SemiBold ;", "Noto Sans Gujarati UI Condensed SemiBold"),
    ("fr", "en", "exécution de tests dans une nouvelle session DBUS", "Runs tests under a new DBus session"),
    ("fr", "en", "paquet de transition pour installer gourmand", "transitionnal package to install gourmand"),
    ("fr", "en", "programme diff graphique", "graphical diff program"),  # French: 1.0 English
]


@pytest.mark.parametrize("src_lang,tgt_lang,src,tgt", UNJUDGED, ids=[u[2][:30] for u in UNJUDGED])
def test_the_language_filter_keeps_short_technical_lines_and_names(src_lang, tgt_lang, src, tgt):
    assert not f.language(Pair(src, tgt, src_lang, tgt_lang), C)


def test_the_defaults_keep_a_clean_corpus():
    """The shipped sample, 2,000 pairs translated by people: the defaults keep only filters that remove real
    noise at least 9 times in 10 there (docs/cleaning.md, Precision), so nearly every pair stays (the whole
    de-en corpus loses 1 of 42,840; the pipelines' rules took 5%)."""
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()
    why = Cleaner(C, "de", "en").reasons([s.encode() for s in de], [t.encode() for t in en])
    assert sum(w is not None for w in why) <= 2, [(de[i], en[i], w) for i, w in enumerate(why) if w]


def test_copied_words_when_switched_on():
    c = CleanConfig(max_copied_words=0.8)
    assert f.copied_words(Pair("libfoo Bibliothek für foo", "libfoo library for foo", "de", "en"), c) is False
    assert f.copied_words(Pair("Ein Programm zum Lesen", "Ein Programm zum Lesen files", "de", "en"), c)


def test_the_script_is_the_languages():
    assert not f.script_ratio(Pair("Привет мир", "Hello world", "ru", "en"), ON)
    assert f.script_ratio(Pair("Hello world", "Hello world", "ru", "en"), ON)
    assert not f.script_ratio(Pair("漢字とかな", "kanji and kana", "ja", "en"), ON)


def test_language_id_ships_its_model_and_downloads_nothing(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("language identification opened a socket")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    assert detect_languages(["Das ist ein Satz.", "This is a sentence.", "Ceci est une phrase."]) == ["de", "en", "fr"]
    assert detect_language("Das ist ein Satz.", candidates=["en", "fr"]) in ("en", "fr")
    assert {"de", "en", "fr", "zh"} <= known_languages() and len(known_languages()) == 176
    with pytest.raises(Exception, match="unknown language code 'xx'"):
        check_language("xx", "--src-lang")


def test_seen_hashes_finds_repeats_within_and_across_chunks():
    seen = SeenHashes()
    assert seen.first_seen(np.array([5, 3, 5, 9], dtype=np.int64)).tolist() == [True, True, False, True]
    for start in range(0, 1000, 100):  # many runs, merged as they come
        assert seen.first_seen(np.arange(start + 10, start + 110, dtype=np.int64)).sum() == 100
    assert seen.first_seen(np.array([3, 4, 5, 2000], dtype=np.int64)).tolist() == [False, True, False, True]
    assert len(seen.runs) <= 11


def _write(path: Path, lines) -> Path:
    path.write_bytes(b"".join((line.encode("utf-8") if isinstance(line, str) else line) + b"\n" for line in lines))
    return path


def test_mt_clean_keeps_the_good_pairs_in_order_and_reports_every_removal(tmp_path):
    good = [("Das ist der erste gute Satz.", "This is the first good sentence."),
            ("Hier kommt ein zweiter Satz über Bücher.", "Here comes a second sentence about books."),
            ("Der dritte Satz spricht von Häusern.", "The third sentence speaks of houses.")]
    copy = ("Die Katze schläft auf dem Sofa.", "Die Katze schläft auf dem Sofa.")
    rows = [good[0], ("", "empty"), good[1], good[0], copy,
            (b"Kaputt \xff\xfe", b"Broken"), ("Version 3 wurde 2019 freigegeben.", "Version 4 was released in 2020."),
            ("This whole sentence was left in English by mistake.", "The German side holds an English sentence."),
            good[2]]
    src = _write(tmp_path / "train.de", [r[0] for r in rows])
    tgt = _write(tmp_path / "train.en", [r[1] for r in rows])
    proc = run_mt("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "cleaned", "--report", tmp_path / "r.json",
                  "--rejected", tmp_path / "rejected.tsv", "--set", "clean.numbers=1.0")  # numbers: off by default
    assert (tmp_path / "cleaned.de").read_text().splitlines() == [g[0] for g in good]
    assert (tmp_path / "cleaned.en").read_text().splitlines() == [g[1] for g in good]
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["pairs"] == 9 and report["kept"] == 3
    assert report["kept"] + sum(report["removed"].values()) == report["pairs"]
    assert {k: v for k, v in report["removed"].items() if v} == {
        "empty": 1, "duplicate": 1, "copy": 1, "invalid_utf8": 1, "numbers": 1, "language": 1}
    rejected = [line.split("\t")[:2] for line in (tmp_path / "rejected.tsv").read_text().splitlines()]
    assert rejected == [["2", "empty"], ["4", "duplicate"], ["5", "copy"], ["6", "invalid_utf8"], ["7", "numbers"],
                        ["8", "language"]]
    assert "kept" in proc.stderr and "- duplicate" in proc.stderr


def test_every_filter_can_be_switched_off(tmp_path):
    src = _write(tmp_path / "a.de", ["", "Die Katze", "Die Katze", "<b>x</b>"])
    tgt = _write(tmp_path / "a.en", ["x", "Die Katze", "Die Katze", "y"])
    off = ["clean.empty=false", "clean.min_words=0", "clean.min_chars=0", "clean.length_ratio=0",
           "clean.copies=false", "clean.duplicates=false", "clean.html=false", "clean.min_alpha_words=0",
           "clean.min_alpha_chars=0", "clean.language_id=false", "clean.punctuation=null"]
    run_mt("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "out", *[a for s in off for a in ("--set", s)])
    assert (tmp_path / "out.de").read_bytes() == src.read_bytes()


def test_memory_stays_bounded_on_a_large_corpus(tmp_path):
    """100,000 distinct pairs against 20,000 (both in full chunks): a Python set of the pairs would grow by
    about 20 MB; the 8-byte hashes grow by 0.6 MB."""
    def corpus(n: int, name: str):
        words = [f"wort{i}" for i in range(n)]
        src = _write(tmp_path / f"{name}.de", (f"Das Haus {w} steht am Fluss und {w} sieht es" for w in words))
        tgt = _write(tmp_path / f"{name}.en", (f"The house {w} stands by the river and {w} sees it" for w in words))
        return src, tgt

    def peak_rss_mb(src, tgt) -> float:
        code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
                "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")
        out = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "mt", "clean", "--src", src,
                              "--tgt", tgt, "-o", tmp_path / "out", "--set", "clean.language_id=false",
                              "--set", "clean.misaligned=false"],  # the duplicates' memory
                             capture_output=True, text=True, check=True, cwd=Path(__file__).parents[2])
        return float(out.stdout)

    small, large = peak_rss_mb(*corpus(20_000, "small")), peak_rss_mb(*corpus(100_000, "large"))
    assert len((tmp_path / "out.de").read_text().splitlines()) == 100_000
    naive = sys.getsizeof(set(range(80_000))) / 2**20 + 80_000 * (2 * 100 + 56) / 2**20  # set, str, tuples
    assert large - small < 10 < naive, (small, large, naive)


def test_different_line_counts_name_both_counts_and_write_nothing(tmp_path):
    src = _write(tmp_path / "train.de", ["Hallo Welt"] * 5)
    tgt = _write(tmp_path / "train.en", ["Hello world"] * 4)
    proc = run_mt("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "out", check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"error: parallel files differ in length: {src} has 5 lines, {tgt} has 4"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.de", "train.en"]


@pytest.mark.parametrize("args,message", [
    (["--set", "clean.max_wrods=3"], "unknown key 'clean.max_wrods'"),
    (["--src-lang", "xx"], "unknown language code 'xx' for language identification"),
    (["--set", "clean.length_ratio=0.5"], "clean.length_ratio must be at least 1"),
    (["--set", "clean.word_alignment=-1"], "clean.word_alignment must be a finite number, not negative"),
    (["--set", "clean.align_pairs=10"], "clean.align_pairs must be at least 1000"),
    (["--set", "clean.min_words=200"], "clean.min_words (200) is above clean.max_words (150)"),
    (["--set", "clean.min_chars=20", "--set", "clean.max_chars=10"],
     "clean.min_chars (20) is above clean.max_chars (10)"),
    (["--set", "clean.ratio_unit=letters"], "clean.ratio_unit must be one of chars, words"),
])
def test_bad_settings_are_one_line_errors(tmp_path, args, message):
    src, tgt = _write(tmp_path / "train.de", ["Hallo Welt"]), _write(tmp_path / "train.en", ["Hello world"])
    proc = run_mt("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "out", *args, check=False)
    assert proc.returncode == 1 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("out*")) and not list(tmp_path.glob(".out*"))


def test_a_minimum_is_checked_against_its_maximum_only_when_there_is_one():
    assert load_config(None, ["clean.min_words=200", "clean.max_words=0"]).clean.min_words == 200  # 0: no maximum
    with pytest.raises(ConfigError, match=r"^config: clean.min_chars \(5\) is above clean.max_chars \(4\)"):
        load_config(None, ["clean.min_chars=5", "clean.max_chars=4"])


def test_a_config_file_with_an_unknown_clean_key_and_an_output_over_an_input_are_refused(tmp_path):
    src, tgt = _write(tmp_path / "train.de", ["Hallo Welt"]), _write(tmp_path / "train.en", ["Hello world"])
    (tmp_path / "clean.yaml").write_text("clean:\n  max_words: 50\n  lenght_ratio: 2\n")
    proc = run_mt("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "out", "--config", tmp_path / "clean.yaml",
                  check=False)
    assert proc.returncode == 1 and f"{tmp_path / 'clean.yaml'}: unknown key 'clean.lenght_ratio'" in proc.stderr
    proc = run_mt("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "train", check=False)
    assert proc.returncode == 1 and "is also the input --src" in proc.stderr
    assert src.read_text() == "Hallo Welt\n"


def test_a_full_disk_is_one_line_and_leaves_no_output(tmp_path):
    """`ulimit -f` (file size in 1 KiB blocks) makes the write fail as a full disk does (EFBIG, not ENOSPC)."""
    rows = [f"Das ist der Satz Nummer {i} über das Haus." for i in range(3000)]
    src = _write(tmp_path / "train.de", rows)
    tgt = _write(tmp_path / "train.en", [r.replace("Das ist der Satz Nummer", "This is sentence number")
                                         .replace(" über das Haus", " about the house") for r in rows])
    command = (f"ulimit -f 64; exec {sys.executable} -m mt clean --src {src} --tgt {tgt} -o {tmp_path / 'out'} "
               "--set clean.language_id=false --set clean.misaligned=false")  # eflomal's files: the test below
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'out.de'}: File too large", proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.de", "train.en"]


def test_eflomal_failing_is_one_line_and_leaves_no_output(tmp_path):
    """eflomal's input and score files, in the temporary folder, past `ulimit -f` (as on a full /tmp)."""
    rows = (DATA / "sample-2k.de").read_text().splitlines(), (DATA / "sample-2k.en").read_text().splitlines()
    src, tgt = _write(tmp_path / "train.de", rows[0]), _write(tmp_path / "train.en", rows[1])
    out = tmp_path / "out"
    command = f"ulimit -f 64; exec {sys.executable} -m mt clean --src {src} --tgt {tgt} -o {out}"
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: eflomal failed on "), proc.stderr
    assert "TMPDIR" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.de", "train.en"]


def test_data_clean_makes_prepare_clean_the_training_corpus_not_the_dev_set(tmp_path):
    rows = [line for line in (DATA / "sample-2k.de").read_text().splitlines()]
    src = _write(tmp_path / "train.de", rows + rows[:300])  # 300 duplicates
    tgt = _write(tmp_path / "train.en", (DATA / "sample-2k.en").read_text().splitlines() +
                 (DATA / "sample-2k.en").read_text().splitlines()[:300])
    out = tmp_path / "run"
    run_mt("prepare", TINY, *tiny_overrides(out, **{"data.train_src": src, "data.train_tgt": tgt,
                                                    "data.clean": "true"}))
    reports = json.loads((out / "data" / "clean.json").read_text())
    assert len(reports) == 1 and reports[0]["pairs"] == 2300 and reports[0]["removed"]["duplicate"] >= 300
    corpus = json.loads((out / "data" / "corpus.json").read_text())
    assert corpus["stats"]["train_pairs"] == reports[0]["kept"]
    assert corpus["stats"]["dev_pairs"] == len((small_dev() / "dev.de").read_text().splitlines())
    assert not (out / "data" / "cleaned").exists()
    changed = run_mt("prepare", TINY, *tiny_overrides(out, **{"data.train_src": src, "data.train_tgt": tgt,
                                                              "data.clean": "true", "clean.max_words": 40}),
                     check=False)
    assert changed.returncode == 1 and "clean.max_words" in changed.stderr


def test_word_alignment_removes_misaligned_pairs_and_scores_a_short_last_block_with_context():
    """The shipped 2,000-pair sample with every 20th target replaced by another line's (100 misaligned pairs),
    read in chunks of 250 and aligned in blocks of 1,000 kept pairs (the last of 100 pairs beside the previous
    block's): most misaligned pairs go, nearly all the others stay, in order. On this small sample the two kinds
    separate less well than on the benchmark's 43,000 pairs: hence the threshold 10, not 11. eflomal samples:
    four runs removed 76-81 misaligned pairs, 86-99 others, 5-7 of the last block."""
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()
    de, en = de + de[:100], en + en[:100]  # 2,100 pairs, so that the last block is 100 kept pairs
    misaligned = set(range(0, 2000, 20))
    en = [en[(i + 1000) % 2000] if i in misaligned else t for i, t in enumerate(en)]
    cfg = CleanConfig(duplicates=False, language_id=False, numbers=0, length_ratio=0, punctuation=None,
                      misaligned=False, word_alignment=10.0, align_pairs=1000)
    cleaner = Cleaner(cfg, "de", "en")
    judged = list(cleaner.judged((
        [s.encode() for s in de[i:i + 250]], [t.encode() for t in en[i:i + 250]]) for i in range(0, 2100, 250)))
    why = [w for _, _, chunk in judged for w in chunk]
    assert [s.decode() for src, _, _ in judged for s in src] == de  # every chunk, in order
    removed = {i for i, w in enumerate(why) if w == "word_alignment"}
    assert len(removed & misaligned) >= 65, len(removed & misaligned)  # measured: 80
    assert len(removed - misaligned) <= 120, len(removed - misaligned)  # of 2,000 aligned pairs; measured: 4%
    assert len(removed & set(range(2000, 2100))) <= 15  # the short last block (scored beside 900 earlier pairs)


def test_word_alignment_in_mt_clean_is_counted_in_the_report(tmp_path):
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()[:1200]
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()[:1200]
    en = [en[(i + 600) % 1200] if i % 40 == 0 else t for i, t in enumerate(en)]  # 30 targets of other lines
    src, tgt = _write(tmp_path / "c.de", de), _write(tmp_path / "c.en", en)
    run_mt("clean", "--src", src, "--tgt", tgt, "-o", tmp_path / "out", "--report", tmp_path / "r.json",
           "--rejected", tmp_path / "rej.tsv", "--set", "clean.word_alignment=10", "--set", "clean.language_id=false",
           "--set", "clean.misaligned=false")
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["kept"] + sum(report["removed"].values()) == report["pairs"] == 1200
    rejected = dict(line.split("\t")[:2] for line in (tmp_path / "rej.tsv").read_text().splitlines())
    assert report["removed"]["word_alignment"] == list(rejected.values()).count("word_alignment") > 0
    # eflomal samples, so which pairs go varies from run to run; on 1,200 pairs a misaligned pair that the other
    # filters leave goes far more often than an aligned one (eight runs: 6-11 of about 14, against 45-59 of about
    # 1,150)
    misaligned = {str(i + 1) for i in range(0, 1200, 40)}
    by_alignment = {line for line, why in rejected.items() if why == "word_alignment"}
    by_others = set(rejected) - by_alignment
    rate_misaligned = len(by_alignment & misaligned) / len(misaligned - by_others)
    aligned_left = 1200 - len(misaligned) - len(by_others - misaligned)
    rate_aligned = len(by_alignment - misaligned) / aligned_left
    assert rate_misaligned > 3 * rate_aligned, (rate_misaligned, rate_aligned)


def test_the_misaligned_threshold_follows_the_corpus_share_of_shuffled_looking_pairs():
    """Scores drawn as eflomal's are on the benchmark (translations 7 +- 4, shuffled and misaligned pairs 24 +- 3.5):
    a corpus with 10% misaligned pairs loses nearly all of them and few translations; the translations alone lose
    nothing, though the top of their scores is above the first corpus' threshold."""
    rng = np.random.default_rng(1)
    good, shuffled, bad = rng.normal(7, 4, 9000), rng.normal(24, 3.5, 5000), rng.normal(24, 3.5, 1000)
    cut = threshold(np.concatenate([good, bad]), shuffled)
    assert (bad > cut).mean() > 0.9 and (good > cut).mean() < 0.02, ((bad > cut).mean(), (good > cut).mean())
    assert misaligned_share(np.concatenate([good, bad]), shuffled) == pytest.approx(0.1, abs=0.02)
    assert good.max() > cut and threshold(good, shuffled) == np.inf


def test_misaligned_judges_nothing_where_the_score_cannot_tell_pairs_from_shuffled_ones():
    """A corpus misaligned as a whole (every target another line's): its pairs score as shuffled ones do, so the
    estimated share is above a half, and nothing is removed but a note is written."""
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()
    notes = []
    assert not misaligned(de, en[1000:] + en[:1000], C, np.random.default_rng(0), notes.append).any()
    assert len(notes) == 1 and "cannot tell them apart, none removed" in notes[0]


def test_misaligned_finds_shuffled_targets_in_a_small_corpus_and_spares_the_rest():
    """The shipped 2,000-pair sample with every 20th target replaced by another line's (100 misaligned pairs).
    eflomal samples, so the counts vary from run to run: in 29 runs 14-70 of the 100 were removed (24 runs 36 or
    more) and 4-26 of the 1,900 others; the sample as it is lost 5-18. On so few pairs (400 shuffled ones in 8
    bins, a model fitted to 2,400 pairs) the threshold is coarse: it stops at the first bin that holds too many
    good pairs. So the test asks for what every run showed, a tenth found and a misaligned pair at least five
    times as likely removed as another; the recall on a corpus of the benchmark's size is in docs/cleaning.md."""
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()
    shuffled = set(range(0, 2000, 20))
    mixed = [en[(i + 1000) % 2000] if i in shuffled else t for i, t in enumerate(en)]
    judged = list(Cleaner(C, "de", "en").judged(
        ([s.encode() for s in de[i:i + 500]], [t.encode() for t in mixed[i:i + 500]]) for i in range(0, 2000, 500)))
    assert [t.decode() for _, tgt, _ in judged for t in tgt] == mixed  # every chunk, in order
    removed = {i for i, w in enumerate(w for _, _, why in judged for w in why) if w == "misaligned"}
    found, others = len(removed & shuffled), len(removed - shuffled)
    assert found >= 10 and found / 100 >= 5 * others / 1900, (found, others)
    assert misaligned(de, en, C, np.random.default_rng(0)).sum() <= 40
    assert not misaligned(de[:900], mixed[:900], C, np.random.default_rng(0)).any()  # under 1,000 pairs: unjudged
