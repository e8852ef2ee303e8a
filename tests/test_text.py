"""The text helpers (provenance/text.py) the local generator, verifiers and lexical check share."""

from __future__ import annotations

import pytest

from provenance import text as T


def test_word_lists_are_read_from_their_data_files() -> None:
    assert {"the", "and", "of"} <= T.STOPWORDS
    assert {"what", "how", "does"} <= T.QUESTION_WORDS
    assert {"happens", "along", "allowed"} <= T.QUESTION_FILLER
    assert {"not", "never", "without", "can't"} <= T.NEGATIONS
    # Months keep their order: the full names, then the abbreviations.
    assert T.MONTHS[:3] == ["january", "february", "march"] and T.MONTHS[-1] == "dec"
    assert len(T.MONTHS) == 24
    # No comment line of a data file is read as a word.
    lists = [T.STOPWORDS, T.QUESTION_WORDS, T.QUESTION_FILLER, T.NEGATIONS, frozenset(T.MONTHS)]
    assert not any(w.startswith("#") or not w or w != w.strip() for words in lists for w in words)


@pytest.mark.parametrize(
    ("forms", "stem"),
    [
        (("locker", "lockers"), "locker"),
        (("book", "booking"), "book"),
        (("study", "studies", "studied"), "study"),
        (("stop", "stopped"), "stop"),
        (("fee", "fees"), "fee"),
        (("member", "members", "member's"), "member"),
    ],
)
def test_stem_brings_a_words_forms_together(forms: tuple[str, ...], stem: str) -> None:
    assert {T.stem(f) for f in forms} == {stem}


def test_stem_leaves_short_words_and_numbers_alone() -> None:
    assert T.stem("ice") == "ice"
    assert T.stem("its") == "its"
    assert T.stem("2024") == "2024"
    assert T.stem("Lockers") == "locker"  # lower-cased first


def test_content_terms_drop_stopwords_and_question_words_and_stem_the_rest() -> None:
    assert T.content_terms("How much does a standard locker cost per month?") == {
        "standard",
        "locker",
        "cost",
        "per",
        "month",
    }
    # Number words count as the numbers they name; one-letter words (not digits) are dropped.
    assert T.content_terms("The three lockers are free") == {"3", "free", "locker"}
    assert T.content_terms("a 5 b") == {"5"}


def test_numbers_normalise_how_they_are_written() -> None:
    found = T.numbers("A locker costs $14 a month, or 1,200 for ten people at 9:30; 50 % off, $30.00.")
    assert found == {"$14", "1200", "10", "9:30", "50%", "$30"}
    assert T.numbers("no figures here") == set()
    # Part of a word or a version is not a number of its own.
    assert T.numbers("room B12") == set()


def test_one_standing_for_a_thing_is_no_number() -> None:
    # A determiner before it and nothing meaningful after: a pronoun, so the question pins no number ...
    assert T.bare_numbers("My door fob snapped. What do I pay for a new one?") == set()
    assert T.bare_numbers("Which one is cheaper?") == set()
    assert T.bare_numbers("No one is on duty on Monday.") == set()
    # ... while a count still counts, whatever comes before it.
    assert T.bare_numbers("Each member may bring one guest.") == {"1"}
    assert T.bare_numbers("Keyholder membership includes one standard locker.") == {"1"}
    assert T.bare_numbers("the one guest, at least one") == {"1"}
    assert T.bare_numbers("Only one per member.") == {"1"}
    # The support check reads claims the same way: a pronoun "one" is not a number the passage must hold.
    assert T.unsupported_numbers("A replacement for a lost one is $15.", "A replacement keyfob costs $15.") == set()
    assert T.unsupported_numbers("Members may bring one guest.", "Members may bring two guests.") == {"1"}


def test_unsupported_numbers_keep_a_currency_but_let_a_plain_number_match_an_amount() -> None:
    # The claim's "$14" needs the sign in the support ("14 dollars" lacks it); its plain 14 days match the 14.
    assert T.unsupported_numbers("The fee is $14 for 14 days", "It costs 14 dollars, or $20") == {"$14"}
    assert T.unsupported_numbers("It costs 14", "It costs $14") == set()
    assert T.unsupported_numbers("Open 9:30 to 17:00 with 50% off", "Hours 9:30 to 17:00; 50% off") == set()
    assert T.unsupported_numbers("50% off", "50 days") == {"50%"}
    assert T.unsupported_numbers("No numbers at all", "") == set()


def test_months_by_their_three_letters_and_may_only_capitalised() -> None:
    assert T.months("The open house in March and may be in May; also Sept. and december") == {
        "mar",
        "may",
        "sep",
        "dec",
    }
    assert T.months("you may join whenever you like") == set()


def test_dates_not_covered_years_always_count() -> None:
    assert T.dates_not_covered(
        "What happened at the 2028 AGM?", "The AGM was held.", "The 2027 AGM elected a board."
    ) == ["2028"]
    assert T.dates_not_covered("What happened at the 2027 AGM?", "It met.", "The 2027 AGM elected a board.") == []
    # A decade or a century is covered by any year inside it, or by the century's name.
    assert T.dates_not_covered("What happened in the 1990s?", "x", "In 1994 the club opened.") == []
    assert T.dates_not_covered("What happened in the 1990s?", "x", "In 2004 the club opened.") == ["1990s"]
    assert T.dates_not_covered("What happened in the 1100s?", "x", "In the 12th century a castle was built.") == []


def test_dates_not_covered_months_count_only_when_the_claim_names_other_months() -> None:
    question = "Is there an open house in December?"
    other_months = "Open houses are in March, June and October."
    assert T.dates_not_covered(question, other_months, "Open houses: March, June, October.") == ["dec"]
    assert T.dates_not_covered(question, other_months, "Open houses: March, June, October and December.") == []
    # A rule that holds all year names no month, and answers the question.
    assert T.dates_not_covered("Can I join in December?", "Anyone can join at any time.", "Open all year.") == []


def test_entities_are_capitalised_words_not_at_a_sentence_start() -> None:
    # "Room B. Alice" would be one sentence to the segmenter ("B." reads as an initial, as in "John B. Smith").
    found = T.entities("Members of the Gold tier may use Room B on weekdays. Alice runs the desk in March.")
    assert found == {"gold", "room", "b"}  # not "Members" or "Alice" (sentence-initial), nor a month
    assert T.entities("all lower case here.") == set()


def test_has_negation() -> None:
    assert T.has_negation("You cannot bring pets")
    assert T.has_negation("You mustn't")
    assert T.has_negation("They shan't")  # any n't, listed or not
    assert T.has_negation("Entry without a card")
    assert not T.has_negation("Pets are welcome")
    assert not T.has_negation("Nothingness is a word")  # whole words only


def test_split_sentences_takes_list_items_and_lines_of_a_list_as_sentences() -> None:
    text = "First sentence. Second one! Third?\n\n- item one\n- item two\n\nA line\nwrapped here."
    assert T.split_sentences(text) == [
        "First sentence.",
        "Second one!",
        "Third?",
        "item one",
        "item two",
        "A line wrapped here.",
    ]
    # A sentence ends before a capital or a digit, not inside a number.
    assert T.split_sentences("It costs 3.5 dollars. Next.") == ["It costs 3.5 dollars.", "Next."]
    assert T.split_sentences("") == []


def test_sentence_ranges_locate_each_sentence_even_when_repeated() -> None:
    text = "Lockers cost $14.\n\n- Keys are $5.\n- Spares too.\n\nLockers cost $14."
    ranges = T.sentence_ranges(text)
    assert [s for _, _, s in ranges] == T.split_sentences(text)
    assert ranges == [
        (0, 17, "Lockers cost $14."),
        (21, 33, "Keys are $5."),
        (36, 47, "Spares too."),
        (49, 66, "Lockers cost $14."),
    ]
    for start, end, sentence in ranges:
        assert text[start:end] == sentence
    # A sentence that wraps over lines still maps onto the text it came from.
    ((start, end, sentence),) = T.sentence_ranges("A line\nwrapped here.")
    assert (start, end, sentence) == (0, 20, "A line wrapped here.")


def test_sub_questions_split_a_question_that_asks_two_things() -> None:
    assert T.sub_questions("How much is a locker, and can I get a spare key?") == [
        "How much is a locker?",
        "Can I get a spare key?",
    ]
    assert T.sub_questions("How much is a locker?") == ["How much is a locker?"]
    # Circumstances and a question are one question.
    question = "I lost my keyfob, how much is a replacement?"
    assert T.sub_questions(question) == [question]


def test_asks_tells_a_question_from_its_circumstances() -> None:
    assert T.asks("how much is a replacement")
    assert T.asks("Can I bring a guest")
    assert not T.asks("I lost my keyfob")
    assert not T.asks("however it goes")  # a question word only as a whole word


def test_is_sentence_of_needs_a_whole_sentence_not_a_substring() -> None:
    passage = "Welcome.  If you join before May, the fee is\n$30. Bye."
    assert T.is_sentence_of("If you join before May, the fee is $30.", passage)
    assert not T.is_sentence_of("the fee is $30", passage)
    assert T.quoted_in("the fee is $30", passage)  # a quote, but not a sentence of it
    assert T.is_sentence_of("Welcome.", passage)
