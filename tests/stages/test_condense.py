"""The condense stage's local method on its own: what a follow-up becomes, and when an answer to an elliptic
follow-up speaks to its own words."""

from __future__ import annotations

from provenance.stages.condense import Previous, condense, fuse, kind_of, speaks_to, standalone, topic

MAKER = "How much is Maker membership per month?"


def test_a_pronoun_is_replaced_by_the_previous_questions_topic() -> None:
    assert topic(MAKER) == "maker membership"
    assert standalone("Is it cheaper for students?", MAKER) == ("pronoun", "Is maker membership cheaper for students?")
    assert standalone("So that's $50, right?", MAKER) == ("pronoun", "So maker membership is $50, right?")


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
    assert alone.queries == ["Is there car parking for members?"] and alone.own_terms == []


def test_an_answer_that_holds_none_of_an_elliptic_follow_ups_own_words_does_not_speak_to_it() -> None:
    own = ["larg"]
    assert not speaks_to(own, ["A small locker costs $10 per month."])
    assert speaks_to(own, ["A large locker costs $18 per month."])
    # The previous answer given again beside the new one: a claim of it holds none of the follow-up's words.
    assert not speaks_to(own, ["A small locker costs $10 per month.", "A large locker costs $18 per month."])
    assert speaks_to([], ["anything"])


def test_ranks_are_fused_by_reciprocal_rank() -> None:
    assert fuse([["a", "b", "c"], ["c", "a", "d"]], 3) == ["a", "c", "b"]
