"""Inline markup given to a tag-trained model as tags and read back from its output (mt/documents/model_tags.py),
with outputs given here; a real tag-trained model: tests/documents/test_tag_trained_model.py."""

from __future__ import annotations

from mt.documents.html import HtmlDocument
from mt.documents.messages import MessageText
from mt.documents.model_tags import model_spans, tags_to_model, without_tags, word_map

DOCUMENT = ("<p>Das Paket <b>foo-bar</b> enthält <a href='x'>die <i>Daten</i></a><img src=x> für "
            "Blobby<sup>1</sup>.</p>")


def read(document: str, tags: bool = True) -> HtmlDocument:
    with tags_to_model(tags):
        return HtmlDocument(document)


def test_each_element_goes_to_the_model_as_a_numbered_tag_without_spaces_and_a_marker_as_a_lone_one():
    assert read(DOCUMENT).sentences == ["Das Paket <g1>foo-bar</g1> enthält <g2>die <g3>Daten</g3></g2><x4/> für "
                                        "Blobby<x5/>."]
    assert read(DOCUMENT, tags=False).sentences == ["Das Paket foo-bar enthält die Daten für Blobby1."]
    assert HtmlDocument(DOCUMENT).sentences == read(DOCUMENT, tags=False).sentences  # outside the block: no tags


def test_the_tags_the_model_wrote_place_the_elements_whatever_the_alignment_says():
    out = "The package <g1>foo-bar</g1> contains <g2>the <g3>data</g3></g2> <x4/>for Blobby<x5/>."
    rendered = read(DOCUMENT).render([(out, "0-7 1-6 2-5 3-4 4-3 5-2 6-1 7-0")])
    assert rendered == "<p>The package <b>foo-bar</b> contains <a href='x'>the <i>data</i></a> <img src=x>for " \
                       "Blobby<sup>1</sup>.</p>"
    reordered = read("<p>Ich habe <i>den Hund</i> <b>gesehen</b>.</p>")
    assert reordered.sentences == ["Ich habe <g1>den Hund</g1> <g2>gesehen</g2>."]
    assert reordered.render([("I <g2>saw</g2> <g1>the dog</g1>.", "")]) == "<p>I <b>saw</b> <i>the dog</i>.</p>"


def test_a_tag_the_model_dropped_or_wrote_twice_falls_back_to_the_alignment():
    document = "<p>Ich habe <i>den Hund</i> <b>gesehen</b>.</p>"
    aligned = "0-0 1-1 2-3 3-4 4-2"
    expected = read(document, tags=False).render([("I have seen the dog.", aligned)])
    assert expected == "<p>I have <b>seen</b> <i>the dog</i>.</p>"
    for out in ("I have seen the dog.", "I have <g2>seen</g2> <g2>the</g2> dog.", "<g1>I</g1> have <g1>seen the dog.",
                "I have </g2>seen<g2> the dog."):
        assert read(document).render([(out, aligned)]) == expected, out


def test_a_lost_name_in_the_models_tags_is_written_as_sent_in_place_of_what_they_hold():
    document = read("<p>Das Spiel <b>Blobby</b> ist da.</p>")
    assert document.render([("The game <g1>Blobley</g1> is here.", "")]) == "<p>The game <b>Blobby</b> is here.</p>"


def test_tags_alone_between_words_leave_one_space_and_the_alignment_skips_them():
    assert without_tags("a <x1/> b <g2> c</g2> ") == ("a b c", {"<x1/>": [2], "<g2>": [4], "</g2>": [5]})
    assert model_spans("a <g1> b c </g1> d") == ("a b c d", {1: (2, 5)})
    assert word_map("a <x1/> b<x2/> <g3>c</g3>") == [0, None, 1, 2]


def test_a_messages_placeholders_are_placed_by_alignment_whatever_the_model():
    with tags_to_model(True):
        message = MessageText("Datei %s <b>gelöscht</b>")
    assert message.sentences == ["Datei gelöscht"]
