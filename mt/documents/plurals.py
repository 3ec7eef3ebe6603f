"""How many plural forms a language has, which number picks each, and a number to translate each form with.

A PO file says it in its header, `Plural-Forms: nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : ...);`, a C
expression evaluated here by the standard library's `gettext.c2py`. A file without one is given its target
language's line from PLURAL_FORMS, the expressions gettext's manual and CLDR's plural rules give for integers
(Czech's and Slovak's three forms, Polish's, Russian's and Ukrainian's three, Arabic's six, one for languages
without a plural).
"""

from __future__ import annotations

import gettext
import re
from collections.abc import Callable
from dataclasses import dataclass

from mt.errors import MtError

TWO = "nplurals=2; plural=(n != 1);"
ONE = "nplurals=1; plural=0;"
FRENCH = "nplurals=2; plural=(n > 1);"
SLAVIC = ("nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : "
          "2);")
PLURAL_FORMS = {
    **dict.fromkeys(("en", "de", "nl", "sv", "da", "nb", "nn", "no", "fi", "et", "el", "hu", "it", "es", "ca", "gl",
                     "eu", "bg", "tr", "he", "af", "eo", "fy", "sq", "hi", "bn", "ur", "ta", "te", "ml", "sw"), TWO),
    **dict.fromkeys(("fr", "pt_BR", "oc", "br", "fil", "ak", "am", "ln", "mg", "ti", "wa"), FRENCH),
    **dict.fromkeys(("ja", "ko", "zh", "vi", "th", "id", "ms", "lo", "km", "my", "ka"), ONE),
    **dict.fromkeys(("ru", "uk", "be", "bs", "hr", "sr"), SLAVIC),
    "pt": TWO,
    "cs": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "sk": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "lt": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "lv": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n != 0 ? 1 : 2);",
    "ro": "nplurals=3; plural=(n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2);",
    "sl": "nplurals=4; plural=(n%100==1 ? 0 : n%100==2 ? 1 : n%100==3 || n%100==4 ? 2 : 3);",
    "ga": "nplurals=5; plural=(n==1 ? 0 : n==2 ? 1 : n>=3 && n<=6 ? 2 : n>=7 && n<=10 ? 3 : 4);",
    "ar": "nplurals=6; plural=(n==0 ? 0 : n==1 ? 1 : n==2 ? 2 : n%100>=3 && n%100<=10 ? 3 : n%100>=11 ? 4 : 5);",
}
HEADER = re.compile(r"^\s*nplurals\s*=\s*(\d+)\s*;\s*plural\s*=\s*(.+?);?\s*$")
SEARCHED = range(1000)  # the numbers a form's example is looked for in


@dataclass(frozen=True)
class PluralForms:
    """A language's plural forms: the header line, how many, and which form a number takes."""
    line: str
    count: int
    form: Callable[[int], int]

    def example(self, index: int) -> int | None:
        """The number to translate form `index` with: 1 for a form that only 1 takes (a singular), else the
        smallest number above 1 that takes it (21 for Russian's form of 1, 21, 31, ...), else the smallest
        (French's 0 and 1: 1); None for a form no number up to 999 takes."""
        numbers = [n for n in SEARCHED if self.form(n) == index]
        if numbers == [1] or not numbers:
            return numbers[0] if numbers else None
        return next((n for n in numbers if n > 1), 1 if 1 in numbers else numbers[0])

    def singular(self, index: int) -> bool:
        """Whether form `index` is translated from the singular source text (msgid): a form no number above 1
        takes."""
        return all(n <= 1 for n in SEARCHED if self.form(n) == index)


def parsed(line: str, where: str) -> PluralForms:
    """The forms a Plural-Forms line gives; an MtError naming `where` for one that is no such line."""
    match = HEADER.match(line)
    try:
        if not match:
            raise ValueError("not nplurals=N; plural=EXPRESSION;")
        form = gettext.c2py(match.group(2))
        count = int(match.group(1))
        if not 1 <= count <= 6 or any(not 0 <= form(n) < count for n in SEARCHED):
            raise ValueError(f"a plural form outside 0..{count - 1}")
    except (ValueError, SyntaxError, RecursionError) as e:
        raise MtError(f"{where}: Plural-Forms '{line}': {e}") from None
    return PluralForms(line, count, form)


def for_language(language: str | None) -> PluralForms | None:
    """The plural forms of `language` (pt_BR, pt-BR or pt), None for a language not in PLURAL_FORMS."""
    if not language:
        return None
    code = language.replace("-", "_").split(".")[0].split("@")[0]
    line = PLURAL_FORMS.get(code) or PLURAL_FORMS.get(code.split("_")[0].lower())
    return parsed(line, language) if line else None
