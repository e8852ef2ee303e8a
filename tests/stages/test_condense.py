"""The condense stage's local method on its own: what a follow-up becomes, and when an answer to an elliptic
follow-up speaks to its own words."""

from __future__ import annotations

from provenance.claims.vectors import WordVectors
from provenance.inference.embedder import Embedder
from provenance.stages.condense import (
    Previous,
    clean,
    condense,
    fuse,
    kind_of,
    speaks_to,
    standalone,
    subject_of,
    topic,
)

MAKER = "How much is Maker membership per month?"


def test_a_pronoun_is_replaced_by_the_previous_questions_topic_as_written() -> None:
    assert topic(MAKER) == "Maker membership"
    assert standalone("Is it cheaper for students?", MAKER) == ("pronoun", "Is Maker membership cheaper for students?")
    assert standalone("So that's $50, right?", MAKER) == ("pronoun", "So Maker membership is $50, right?")
    # The word after "how" is the question's measure, not its subject.
    assert topic("How long a lunch break can I take?") == "lunch break"
    # "they" stands for several: the previous question's first plural.
    assert topic("How many guests can a member bring?", plural=True) == "guests"
    assert standalone("Can they bring their kids?", "How many guests can a member bring?")[1] == (
        "Can guests bring their kids?"
    )
    # "one" closing a question stands for the thing already named; anywhere else it is a number.
    assert standalone("Do Keyholders have to pay for one?", "How much is a large locker?")[1] == (
        "Do Keyholders have to pay for large locker?"
    )
    assert kind_of("Can I bring one guest on Saturdays?") == "alone"


def test_what_a_follow_up_says_before_its_ask_is_dropped_and_an_announced_new_subject_stands_alone() -> None:
    assert clean("Different question: when is the AGM?") == ("When is the AGM?", True)
    assert clean("OK, where can I leave my bike?") == ("Where can I leave my bike?", False)
    # A colon inside the ask is not an announcement.
    assert clean("What does this mean: flat rate?") == ("What does this mean: flat rate?", False)
    assert standalone("Switching topics: who is the Safety Officer?", MAKER) == (
        "switch",
        "Who is the Safety Officer?",
    )


def test_a_short_question_is_given_the_previous_questions_subject_not_its_ask() -> None:
    assert subject_of("When does the board meet?") == "board meet"
    assert standalone("Can I go?", "When does the board meet?") == ("question", "Can I go (board meet)?")
    # A pronoun after it means that subject.
    assert topic("Can I go (board meet)?") == "board meet"


def test_an_elliptic_phrase_takes_the_place_of_the_previous_questions_word_of_its_kind(embedder: Embedder) -> None:
    similar = WordVectors(embedder).similarity
    assert standalone("What about weekends?", "What time does the space open on a Tuesday?", similar) == (
        "replaced",
        "What time does the space open on weekends?",
    )
    assert standalone("And the large one?", "How much is a small locker?", similar)[1] == "How much is a large locker?"
    # A name stands for a name, however far apart their vectors.
    assert standalone("And a Maker?", "How many guests can a Community member bring?", similar)[1] == (
        "How many guests can a Maker member bring?"
    )
    # A phrase that names the word itself swaps the word's modifier, not only the word.
    assert standalone("And military leave?", "How much annual leave can I carry over into next year?", similar) == (
        "replaced",
        "How much military leave can I carry over into next year?",
    )
    assert standalone("And the laser induction?", "How much does the woodshop induction cost?", similar)[1] == (
        "How much does the laser induction cost?"
    )
    # Nothing of its kind in the previous question: the phrase is read after it, as without vectors.
    assert standalone("And for students?", MAKER, similar) == (
        "ellipsis",
        "How much is Maker membership per month for students?",
    )


def test_an_elliptic_follow_up_is_read_after_the_previous_question_and_a_question_of_its_own_stands() -> None:
    assert standalone("And for students?", MAKER) == (
        "ellipsis",
        "How much is Maker membership per month for students?",
    )
    assert kind_of("yes") == "ellipsis"
    assert standalone("Is there car parking for members?", MAKER) == ("alone", "Is there car parking for members?")


async def test_the_local_method_fuses_the_follow_up_with_its_reading_and_carries_the_cited_passages() -> None:
    previous = Previous(standalone_question=MAKER, cited_passage_ids=["a", "b"], earlier=[(MAKER, "$85")])
    out = await condense("And the large one?", previous, None, max_chars=500)
    assert out.stage.status == "ok" and out.stage.method == "fused" and out.usages == []
    assert out.queries == ["And the large one?", out.standalone] and out.carried == ["a", "b"]
    assert out.own_terms == ["larg"]
    alone = await condense("Is there car parking for members?", previous, None, max_chars=500)
    # A question of its own is judged as asked and searched after the previous question too.
    assert alone.standalone == "Is there car parking for members?" and alone.own_terms == []
    assert alone.queries == ["Is there car parking for members?", f"Is there car parking for members? {MAKER}"]
    # A pronoun's reading commits to one subject of the previous question: the previous question, which names
    # them all, is searched joined to the follow-up too.
    pronoun = await condense("Is it cheaper for students?", previous, None, max_chars=500)
    assert pronoun.queries == [
        "Is it cheaper for students?",
        "Is Maker membership cheaper for students?",
        f"Is it cheaper for students? {MAKER}",
    ]
    switched = await condense("New topic: is there car parking for members?", previous, None, max_chars=500)
    assert switched.queries == ["New topic: is there car parking for members?", "Is there car parking for members?"]


def test_an_answer_that_holds_none_of_an_elliptic_follow_ups_own_words_does_not_speak_to_it() -> None:
    own = ["larg"]
    assert not speaks_to(own, ["A small locker costs $10 per month."])
    assert speaks_to(own, ["A large locker costs $18 per month."])
    # The previous answer given again beside the new one: a claim of it holds none of the follow-up's words.
    assert not speaks_to(own, ["A small locker costs $10 per month.", "A large locker costs $18 per month."])
    assert speaks_to([], ["anything"])


def test_ranks_are_fused_by_reciprocal_rank() -> None:
    assert fuse([["a", "b", "c"], ["c", "a", "d"]], 3) == ["a", "c", "b"]
