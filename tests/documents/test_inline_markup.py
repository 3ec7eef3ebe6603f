"""HTML's inline markup put back around the words a whole sentence's translation aligns to
(mt/documents/inline_markup.py), with translations and alignments given here; through a real server and model:
tests/serving/test_server.py."""

from __future__ import annotations

from mt.documents.html import HtmlDocument
from mt.documents.fragments import Rendering
from mt.documents.inline_markup import near_copy, written_as_is
from mt.documents.runs import RunsParagraph


def translated(document: str, *translations: tuple[str, str]) -> tuple[list[str], str]:
    doc = HtmlDocument(document)
    return doc.sentences, doc.render(list(translations))


def test_an_inline_element_goes_around_the_words_aligned_to_its_own():
    sentences, out = translated("<p>Das ist <b>sehr</b> gut.</p>", ("This is very good.", "0-0 1-1 2-2 3-3"))
    assert sentences == ["Das ist sehr gut."]  # one sentence, not three fragments
    assert out == "<p>This is <b>very</b> good.</p>"


def test_the_translation_may_reorder_the_words():
    _, out = translated("Ich habe <i>den Hund</i> gestern <b>gesehen</b>.",
                        ("I saw the dog yesterday.", "0-0 1-1 2-2 3-3 4-4 5-1"))
    assert out == "I <b>saw</b> <i>the dog</i> yesterday."


def test_nested_two_deep_and_attributes_kept_byte_for_byte():
    document = '<p>Er <span class="a"  data-x=\'1\'>war <EM title="t">wirklich</EM> müde</span> heute.</p>'
    _, out = translated(document, ("He was really tired today.", "0-0 1-1 2-2 3-3 4-4"))
    assert out == '<p>He <span class="a"  data-x=\'1\'>was <EM title="t">really</EM> tired</span> today.</p>'


def test_text_found_once_in_the_translation_is_wrapped_whatever_the_alignment_says():
    _, out = translated("Version <b>2.0</b> von <i>mt</i> ist da.",
                        ("Version 2.0 of mt is here.", "0-0 1-4 2-2 3-0 4-3 5-5"))
    assert out == "Version <b>2.0</b> of <i>mt</i> is here."


def test_an_element_covering_the_sentence_covers_its_translation():
    _, out = translated("<li><a href='#x'>Das ist gut.</a></li>", ("That is good.", ""))
    assert out == "<li><a href='#x'>That is good.</a></li>"


def test_unaligned_empty_and_void_elements_go_where_their_neighbours_go():
    _, out = translated('Ein <a id="m"></a>Bild <img src="i.png" alt="x"> hier.',
                        ("A picture here.", "0-0 1-1 2-2"))
    assert out == 'A <a id="m"></a>picture <img src="i.png" alt="x">here.'


def test_code_and_translate_no_come_back_as_sent():
    document = ('<p>Führen Sie <code>apt-get &lt;paket&gt;</code> aus.</p>'
                '<div translate="no">Nicht <b>übersetzen</b></div><pre>x <b>y</b></pre>')
    sentences, out = translated(document, ("Run apt-get package.", "0-0 1-0 2-1 3-2 4-0"))
    assert sentences == ["Führen Sie apt-get <paket> aus."]
    assert out == ('<p>Run <code>apt-get &lt;paket&gt;</code>.</p><div translate="no">Nicht <b>übersetzen</b></div>'
                   '<pre>x <b>y</b></pre>')


def test_a_marked_version_path_or_acronym_the_translation_lost_is_written_as_sent():
    """In place of the word aligned to it, else where its neighbours go, spaced; an ordinary word is not."""
    _, out = translated("<p>Installiere <b>GTK+</b> jetzt.</p>", ("Install GTK now.", "0-0 1-1 2-2"))
    assert out == "<p>Install <b>GTK+</b> now.</p>"
    _, out = translated("<p>Lies <i>/etc/hosts.conf</i>.</p>", ("Read etc hosts.", "0-0 1-1 1-2"))
    assert out == "<p>Read <i>/etc/hosts.conf</i>.</p>"
    _, out = translated("<p>Das <b>x86</b> Paket läuft.</p>", ("The package runs.", "0-0 2-1 3-2"))
    assert out == "<p>The <b>x86</b> package runs.</p>"
    _, out = translated("<p>Paket für <b>x86</b></p>", ("Package for", "0-0 1-1"))
    assert out == "<p>Package for <b>x86</b></p>"
    _, out = translated("<p>Die <b>Kiste</b> ist da.</p>", ("The is there.", "0-0 2-1 3-2"))
    assert out == "<p>The<b></b> is there.</p>"  # an ordinary word the translation lost: after the word before


def test_a_lost_marker_is_written_beside_the_word_it_marks_not_in_place_of_it():
    """A number or reference (1, [1]) and text stuck to a word go next to the word's target, as close as in the
    source: the words aligned to them are the word's own."""
    _, out = translated("<p>Dieses Paket enthält Dokumentation<sup>1</sup>.</p>",
                        ("This package contains documentation.", "0-0 1-1 2-2 3-3"))
    assert out == "<p>This package contains documentation<sup>1</sup>.</p>"
    _, out = translated("<p>Es enthält Dokumentation <a href='#r1'>[1]</a>.</p>",
                        ("It contains documentation.", "0-0 1-1 3-2"))
    assert out == "<p>It contains documentation <a href='#r1'>[1]</a>.</p>"
    _, out = translated("<p>Es enthält Dokumentation[<a href='#r1'>1</a>] hier.</p>",
                        ("It contains documentation[1] here.", "0-0 1-1 2-2 3-3"))
    assert out == "<p>It contains documentation[<a href='#r1'>1</a>] here.</p>"  # its text there: taken
    _, out = translated("<p><sup>2</sup>Fußnote hier.</p>", ("Footnote here.", "0-0 1-1"))
    assert out == "<p><sup>2</sup>Footnote here.</p>"
    _, out = translated("<p>Nutze Python<sup>TM</sup> jetzt.</p>", ("Use Python now.", "0-0 1-1 2-2"))
    assert out == "<p>Use Python<sup>TM</sup> now.</p>"
    runs = RunsParagraph(["Es enthält Dokumentation", "1", "."])  # a docx superscript run, then the full stop
    assert runs.render(iter([("It contains documentation.", "0-0 1-1 2-2")])) == \
        [(0, "It contains documentation"), (1, "1"), (2, ".")]


def test_a_marked_name_the_translation_garbled_is_written_in_place_of_the_failed_copy():
    _, out = translated("<p>Das Spiel <b>Blobby</b> ist da.</p>",
                        ("The game (Blobley) is there.", "0-0 1-1 2-2 3-3 4-4"))
    assert out == "<p>The game (<b>Blobby</b>) is there.</p>"
    _, out = translated("<p>Nutze <i>ipmi-locate</i> jetzt.</p>", ("Use ipmilocate now.", "0-0 1-1 2-2"))
    assert out == "<p>Use <i>ipmi-locate</i> now.</p>"
    _, out = translated("<p><i>ipmi-locate</i> ist da.</p>", ("Ipmilocate is there.", "0-0 1-1 2-2"))
    assert out == "<p><i>ipmi-locate</i> is there.</p>"  # a sentence's first word, in lower case: a command's
    _, out = translated("<p><i>Mt-st</i> ist da.</p>", ("Mttst is there.", "0-0 1-1 2-2"))
    assert out == "<p><i>Mt-st</i> is there.</p>"  # not only letters: no word whose capital is grammar's
    # A capitalised first word, and a word translated rather than copied, keep the translation's word.
    _, out = translated("<p><b>Blobby</b> ist da.</p>", ("Blobley is there.", "0-0 1-1 2-2"))
    assert out == "<p><b>Blobley</b> is there.</p>"
    _, out = translated("<p>Das <b>Haus</b> ist da.</p>", ("The house is there.", "0-0 1-1 2-2 3-3"))
    assert out == "<p>The <b>house</b> is there.</p>"


def test_a_marked_name_the_model_copies_when_alone_is_written_where_the_translation_lost_it():
    """The words of lost one-word elements are asked for alone (names and capitalised words, not lower-case
    ones); one the model writes unchanged alone is written in place of the word aligned to it."""
    doc = HtmlDocument("<p>Nutze <b>Edge</b> oder <i>Firefox</i> und <u>nicht</u> <s>Lynx</s> hier.</p>")
    given = [("Use East or Fox and no here.", "0-0 1-1 2-2 3-3 4-4 5-5 7-6")]
    asked = []

    def alone(words):
        asked.append(words)
        return [{"Edge": "Edge", "Firefox": "fire fox.", "Lynx": "Lynx"}[w] for w in words]
    rendering = Rendering(lambda fragments: doc.render(given, fragments))
    out = rendering.rendered(alone(rendering.words()))
    assert asked == [["Edge", "Firefox", "Lynx"]]  # once, in order; not nicht (lower case)
    assert out == "<p>Use <b>Edge</b> or <i>Fox</i> and <u>no</u> <s>Lynx</s> here.</p>"
    rendering = Rendering(lambda fragments: doc.render(given, fragments))
    copied = rendering.rendered(rendering.words())  # every word copied alone
    assert copied == out.replace("<i>Fox</i>", "<i>Firefox</i>")
    assert HtmlDocument("<p>Nutze <b>Edge</b>.</p>").render([("Use Edge.", "0-0 1-1")]) == "<p>Use <b>Edge</b>.</p>"


def test_what_a_failed_copy_is():
    assert all(near_copy(a, b) for a, b in [("Blobby", "Blobley"), ("ipmi-locate", "ipmilocate"),
                                            ("Mozilla", "Milla.")])
    assert not any(near_copy(a, b) for a, b in [("Haus", "house"), ("système", "system"), ("Titel", "TITEL"),
                                                ("Edge", "East's"), ("Qt", "Q"), ("Daemon", "daemon")])


def test_what_a_translation_keeps_as_written():
    assert all(map(written_as_is, ["GTK+", "x86", "07.07", "tar.gz", "/usr/lib/", "LEDs", "BrlAPI", "a_b", "2"]))
    assert not any(map(written_as_is, ["Edge", "Haus", "apt-get", "well-known", "hello.", "", "two words"]))


def test_line_breaks_and_blocks_end_units_and_sentences_are_translated_apart():
    sentences, out = translated("<p>Eins. <b>Zwei</b> drei.<br>Vier</p>",
                                ("One.", "0-0"), ("Two three.", "0-0 1-1"), ("Four", "0-0"))
    assert sentences == ["Eins.", "Zwei drei.", "Vier"]
    assert out == "<p>One. <b>Two</b> three.<br>Four</p>"


def test_an_element_crossing_sentences_keeps_its_tags_in_order():
    _, out = translated("Eins <b>zwei. Drei</b> vier.", ("One two.", "0-0 1-1"), ("Three four.", "0-0 1-1"))
    assert out.count("<b>") == 1 and out.count("</b>") == 1 and out.index("<b>") < out.index("</b>")
    assert out.replace("<b>", "").replace("</b>", "") == "One two. Three four."


def test_siblings_that_align_to_the_same_words_do_not_overlap():
    _, out = translated("<b>Der</b> <i>Hund</i> bellt.", ("The dog barks.", "0-1 1-1 2-2"))
    assert out == "The <b>dog</b><i></i> barks."


def test_entities_are_decoded_for_the_model_and_escaped_again():
    sentences, out = translated("<p>Hund &amp; Katze &lt;3</p>", ("Dog & cat <3", "0-0 1-1 2-2 3-3"))
    assert sentences == ["Hund & Katze <3"]
    assert out == "<p>Dog &amp; cat &lt;3</p>"


def test_a_document_without_text_comes_back_as_sent():
    document = '<!DOCTYPE html><html><head><style>b { x: "<i>" }</style></head><body><!-- c --></body></html>'
    sentences, out = translated(document)
    assert sentences == [] and out == document


def test_a_paragraphs_runs_take_the_words_aligned_to_their_own():
    """docx runs: the longest is the base, text between the others' spans goes to it (white space alone to the
    run before), a run the translation moves is written where it now is."""
    paragraph = RunsParagraph(["Ich habe den Hund ", "gestern", " gesehen."])
    assert paragraph.sentences == ["Ich habe den Hund gestern gesehen."]
    assert paragraph.render(iter([("I saw the dog yesterday.", "0-0 1-1 2-2 3-3 4-4 5-1")])) == \
        [(0, "I "), (2, "saw"), (0, " the dog "), (1, "yesterday"), (0, ".")]
    assert RunsParagraph(["Das ist ", "sehr", " gut, ", "danke", "."]).render(
        iter([("That is very good, thanks.", "0-0 1-1 2-2 3-3 4-4")])) == \
        [(0, "That is "), (1, "very "), (2, "good, "), (3, "thanks"), (4, ".")]


# ---------------------------------------------------------------- Markdown and OpenDocument's XML, the same way


def identity(sentence: str) -> str:
    return " ".join(f"{i}-{i}" for i in range(len(sentence.split())))


def test_markdown_keeps_its_syntax_and_translates_paragraphs_headings_and_cells():
    from mt.documents.markdown import MarkdownDocument

    document = ("# Ein *Titel* ##\n\nUnterstrichen\n=============\n\n"
                "> Das ist **sehr `x`** gut und [hier](https://de.example.org/Übersicht \"T\") mit ![Bild](b.png).\n"
                "> Zweite Zeile\\\n> dritte.\n\n- Punkt <kbd>eins</kbd>\n  weiter\n  1. Unterpunkt <https://a.b>\n\n"
                "```sh\napt-get install mt\n```\n\n[ref]: https://example.org\n\n| A | B |\n|---|:-:|\n| x *y* | z |\n")
    doc = MarkdownDocument(document)
    assert doc.sentences == ["Ein Titel", "Unterstrichen", "Das ist sehr x gut und hier mit .", "Zweite Zeile",
                             "dritte.", "Punkt eins weiter", "Unterpunkt", "A", "B", "x y", "z"]
    out = doc.render([(s.upper(), identity(s)) for s in doc.sentences])
    assert out == ("# EIN *TITEL* ##\n\nUNTERSTRICHEN\n=============\n\n"
                   "> DAS IST **SEHR `x`** GUT UND [HIER](https://de.example.org/Übersicht \"T\") MIT ![Bild](b.png)."
                   " ZWEITE ZEILE\\\nDRITTE.\n\n- PUNKT <kbd>EINS</kbd> WEITER\n  1. UNTERPUNKT <https://a.b>\n\n"
                   "```sh\napt-get install mt\n```\n\n[ref]: https://example.org\n\n| A | B |\n|---|:-:|\n"
                   "| X *Y* | Z |\n")


def test_markdown_escapes_what_the_translation_would_turn_into_markup():
    from mt.documents.markdown import MarkdownDocument

    doc = MarkdownDocument("Ein Stern.\n\n| a |\n|---|\n| b |\n")
    out = doc.render([("A *star* [1].", "0-0 1-1"), ("a|b", "0-0"), ("c", "0-0")])
    assert out == "A \\*star\\* \\[1\\].\n\n| a\\|b |\n|---|\n| c |\n"


def test_opendocument_spans_links_and_spaces_are_inline_fields_and_notes_kept():
    from mt.documents.html import HtmlDocument
    from mt.documents.opendocument import ODF

    body = ('<office:automatic-styles><number:text>.</number:text></office:automatic-styles><office:text>'
            '<text:p text:style-name="P1">Das ist <text:span text:style-name="T1">sehr</text:span> gut,'
            '<text:s text:c="2"/>Seite <text:page-number>3</text:page-number>.</text:p>'
            '<text:p>Links<text:tab/>rechts<text:line-break/>unten'
            '<text:note text:id="n1"><text:note-citation>1</text:note-citation><text:note-body>'
            '<text:p>Fußnote.</text:p></text:note-body></text:note></text:p></office:text>')
    doc = HtmlDocument(body, ODF)
    assert doc.sentences == ["Das ist sehr gut, Seite .", "Links", "rechts", "unten", "Fußnote."]
    out = doc.render([(s.upper(), identity(s)) for s in doc.sentences])
    assert out == ('<office:automatic-styles><number:text>.</number:text></office:automatic-styles><office:text>'
                   '<text:p text:style-name="P1">DAS IST <text:span text:style-name="T1">SEHR</text:span> GUT, '
                   '<text:s text:c="2"/>SEITE <text:page-number>3</text:page-number>.</text:p>'
                   '<text:p>LINKS<text:tab/>RECHTS<text:line-break/>UNTEN'
                   '<text:note text:id="n1"><text:note-citation>1</text:note-citation><text:note-body>'
                   '<text:p>FUSSNOTE.</text:p></text:note-body></text:note></text:p></office:text>')


def test_emphasis_that_lost_its_words_is_not_written_and_a_link_that_lost_them_keeps_its_source_words():
    """Markdown's markers around no words would show (`****`); an empty link is invisible (Markdown, HTML,
    OpenDocument, docx): it is written with its source words, their markup as sent."""
    import io

    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import parse_xml

    from mt.documents.markdown import MarkdownDocument
    from mt.documents.office import DocxDocument
    from mt.documents.opendocument import ODF

    doc = MarkdownDocument("Die **Kiste** ist *da* und [hier *x*](https://x.org) mehr.\n")
    assert doc.render([("The is and more.", "0-0 2-1 4-2 7-3")]) == "The is and [hier *x*](https://x.org) more.\n"
    assert MarkdownDocument("Das **ist** gut.\n").render([("That good.", "0-0 2-1")]) == "That good.\n"
    _, out = translated("<p>Klicke <a href='#x'>hier</a> jetzt, <b>sofort</b>.</p>", ("Click now.", "0-0 2-1"))
    assert out == "<p>Click <a href='#x'>hier</a> now.<b></b></p>"  # HTML's b around nothing: invisible
    odt = HtmlDocument('<text:p>Klicke <text:a xlink:href="x">hier</text:a> jetzt.</text:p>', ODF)
    assert odt.render([("Click now.", "0-0 2-1")]) == '<text:p>Click <text:a xlink:href="x">hier</text:a> now.</text:p>'
    word = docx.Document()
    paragraph = word.add_paragraph("Klicke ")
    rel = word.part.relate_to("https://example.org", RELATIONSHIP_TYPE.HYPERLINK, is_external=True)
    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    r = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
    paragraph._p.append(parse_xml(f'<w:hyperlink {w} {r} r:id="{rel}"><w:r><w:t>hier</w:t></w:r></w:hyperlink>'))
    paragraph.add_run(" jetzt bitte.")
    buffer = io.BytesIO()
    word.save(buffer)
    out = docx.Document(io.BytesIO(DocxDocument(buffer.getvalue(), "in.docx").render(
        [("Click now please.", "0-0 2-1 3-2")])))
    assert out.paragraphs[0].text == "Click hier now please." and out.paragraphs[0].hyperlinks[0].text == "hier"
