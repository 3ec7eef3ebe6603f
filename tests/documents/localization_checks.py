"""What the localization tests share: translate-toolkit's placeholder checks as pofilter runs them, and the check
that a bad file given to `mt translate -i` is one error line with nothing written."""

from __future__ import annotations

import gettext
import xml.etree.ElementTree as ET
from types import SimpleNamespace

from translate.filters import checks, pofilter
from translate.misc.multistring import multistring
from translate.storage import po, xliff, xliff2

from tests.conftest import one_error_line, run_mt

# translate-toolkit's placeholder checks, as `pofilter --mozilla -t printf -t pythonbraceformat -t variables -t xmltags`
# runs them: Mozilla's checker is pofilter's one whose `variables` knows `$HOME`, `${x}`, `{{ x }}` and `&amp;` (the
# standard checker's has no variables to look for).
TOOLKIT_CHECKS = ["printf", "pythonbraceformat", "variables", "xmltags"]


def toolkit_store(data: bytes):
    """A PO or XLIFF file as translate-toolkit reads it. Its factory (and pofilter) takes every .xlf for XLIFF
    1.x, whose reader refuses 2.0: 2.0 has a reader of its own, translate.storage.xliff2."""
    if not data.lstrip().startswith(b"<"):
        return po.pofile.parsestring(data)
    version = ET.fromstring(data).get("version", "")
    return (xliff2.Xliff2File if version.startswith("2") else xliff.xlifffile).parsestring(data)


def toolkit_failures(store) -> dict[str, set[str]]:
    """The checks of TOOLKIT_CHECKS each unit with a target fails, by unit id, run by pofilter's own filter."""
    options = SimpleNamespace(excludefilters={}, limitfilters=TOOLKIT_CHECKS, includefuzzy=True, includereview=True,
                              autocorrect=False)
    found = pofilter.pocheckfilter(options, [checks.MozillaChecker, checks.StandardUnitChecker], checks.CheckerConfig())
    shared = _form_zero_shared(store)
    return {unit.getid(): set(found.filterunit(_paired_with_plural(unit) if shared and unit.hasplural() else unit))
            for unit in store.units if unit.target}


def _form_zero_shared(store) -> bool:
    """Whether the PO file's plural form 0 is taken by other numbers than 1 (Russian's 1, 21, 31, ...), by its
    Plural-Forms read with gettext's c2py. pofilter checks form 0 against the singular msgid, which says no
    number; such a form must say it, and msgfmt --check pairs it with msgid_plural, as this test then does."""
    try:
        plural = gettext.c2py(store.getheaderplural()[1] or "")
    except (AttributeError, ValueError):  # an XLIFF file, a POT's EXPRESSION
        return False
    return any(plural(n) == 0 for n in range(2, 1000))


def _paired_with_plural(unit):
    paired = po.pounit(multistring([unit.source.strings[1]] * 2))
    paired.target = unit.target
    return paired


def each_refused_in_one_line(model, tmp_path, cases: dict[str, tuple[bytes, str]]) -> None:
    """Each file (name -> (bytes, part of the message)) given to `mt translate -i`: one error line naming it, and
    no output written."""
    for name, (data, message) in cases.items():
        (tmp_path / name).write_bytes(data)
        out = tmp_path / f"out-{name}"
        line = one_error_line(run_mt("translate", "-c", model, "-i", tmp_path / name, "-o", out, check=False))
        assert line.startswith(f"error: {tmp_path / name}: ") and message in line, line
        assert not out.exists()
