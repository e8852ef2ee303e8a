"""The condense stage's local method on its own: what a follow-up becomes, and when an answer to an elliptic
follow-up speaks to its own words."""

from __future__ import annotations

from provenance.claims.vectors import WordVectors
from provenance.inference.embedder import Embedder
from provenance.ports import Condensation, Usage
from provenance.stages.condense import (
    Previous,
    clean,
    condense,
    fuse,
    kind_of,
    repeats_previous,
    speaks_to,
    standalone,
    subject_of,
    topic,
    unfaithful,
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
    # "one" closing a question stands for a thing of the kind already named, its noun without its modifiers;
    # anywhere else it is a number.
    assert standalone("Do Keyholders have to pay for one?", "How much is a large locker?")[1] == (
        "Do Keyholders have to pay for a locker?"
    )
    induction = "How long is an induction?"
    assert standalone("Is there a fee for the one?", induction)[1] == "Is there a fee for the induction?"
    assert standalone("Is there a fee for one?", induction)[1] == "Is there a fee for an induction?"
    assert kind_of("Can I bring one guest on Saturdays?") == "alone"


def test_the_verb_after_an_auxiliarys_subject_and_a_measure_after_what_are_no_part_of_the_topic() -> None:
    # After "does", a subject and its verb: "it" is the training, not "training cost".
    assert topic("How much does training cost?") == "training"
    assert standalone("How long does it take?", "How much does training cost?")[1] == "How long does training take?"
    assert topic("When does the board meet?") == "board"
    assert topic("Can guests bring their kids?") == "guests"
    # A pronoun subject ("Do I need ...") leaves the run after it whole, and a longer run may hold an object.
    assert topic("Do I need supervisor approval before working extra hours?") == "supervisor approval"
    assert topic("Does sick leave expire?") == "sick leave"
    # "what time", "which day": the question's measure, as "how long" is.
    assert topic("What time does the space open on a Tuesday?") == "space"
    assert subject_of("What time does the space open on weekends?") == "space open on weekends"


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


class Rewrites:
    """A model condenser that rewrites every follow-up as `rewrite` (the real ones are tested against their
    servers in tests/conversations and tests/profiles)."""

    name = "scripted-condenser"

    def __init__(self, rewrite: str) -> None:
        self.rewrite = rewrite

    async def condense(self, question: str, earlier: object) -> Condensation:
        return Condensation(standalone=self.rewrite, usage=Usage(model="scripted", input_tokens=90, output_tokens=9))

    def worst_case(self) -> Usage:
        return Usage(model="scripted", input_tokens=900, output_tokens=90)


async def test_a_models_rewrite_is_searched_beside_the_rules_reading_and_the_follow_up_as_typed() -> None:
    previous = Previous(standalone_question=MAKER, cited_passage_ids=["a"], earlier=[(MAKER, "It costs $85.")])
    rewrite = "Is Maker membership cheaper for full-time students?"
    out = await condense("Is it cheaper for students?", previous, Rewrites(rewrite), max_chars=500)
    assert out.stage.status == "ok" and out.stage.method == "model" and out.stage.detail is None
    assert out.standalone == rewrite == out.stage.standalone_question and len(out.usages) == 1
    reading = "Is Maker membership cheaper for students?"
    assert out.queries == [rewrite, "Is it cheaper for students?", reading, f"Is it cheaper for students? {MAKER}"]
    # Judged first; the rules' reading is the second, for an answer that doesn't answer the rewrite.
    assert out.second_reading == reading
    # The follow-up leans on the previous turn as the rules read it, whoever rewrote it.
    assert out.leans and out.asks == ["cheaper", "student"] and out.previous_answer == "It costs $85."
    same = await condense("Is it cheaper for students?", previous, Rewrites(reading), max_chars=500)
    assert same.standalone == reading and same.second_reading is None


async def test_a_rewrite_that_is_not_the_follow_ups_question_gives_way_to_the_rules_reading() -> None:
    previous = Previous(standalone_question=MAKER, cited_passage_ids=[], earlier=[(MAKER, "It costs $85 a month.")])
    for follow_up, rewrite, why in (
        ("Is it cheaper for students?", "Is it any cheaper for students?", "pronoun unresolved"),
        ("yes", "Do I need an induction for the laser cutter?", "a reply"),
        ("And for Keyholder?", "How much is Maker membership for students?", "drops"),
        ("Can I go?", "Can I go to the meeting at 7 pm on the second Monday?", "adds figures"),
    ):
        out = await condense(follow_up, previous, Rewrites(rewrite), max_chars=500)
        reading = standalone(follow_up, MAKER)[1]
        assert out.stage.status == "ok" and out.standalone == reading == out.stage.standalone_question, why
        assert rewrite not in out.queries and out.stage.detail and rewrite in out.stage.detail, why
        assert len(out.usages) == 1, why  # the call was made, and is charged
        assert out.second_reading is None and out.stage.method == "model", why


def test_a_faithful_rewrite_resolves_pronouns_keeps_the_follow_ups_words_and_adds_no_figure() -> None:
    before = "How much is Maker membership per month?"
    assert (
        unfaithful("Is Maker membership cheaper for students?", "Is it cheaper for students?", before, "pronoun")
        is None
    )
    assert unfaithful("How much is Keyholder membership per month?", "And Keyholder?", before, "ellipsis") is None
    # A figure the follow-up names, or an earlier question did, is no addition.
    assert unfaithful("Is Maker membership $50 for students?", "So it's $50 for students?", before, "pronoun") is None
    assert "pronoun" in (unfaithful("How long does it take?", "How long does it take?", before, "pronoun") or "")
    # A paraphrase keeps some of the follow-up's own words; a rewrite that keeps none asks something else.
    assert (
        unfaithful("Is Maker membership cheaper for seniors?", "Is it cheaper for students?", before, "pronoun") is None
    )
    dropped = unfaithful("Is Maker membership open on Sundays?", "Is it cheaper for students?", before, "pronoun")
    assert dropped == "drops the follow-up's own words (cheaper, student)"
    assert "asks what" in (unfaithful("Is it open on Sunday?", "ok, thanks", before, "ellipsis") or "")
    assert "adds figures" in (
        unfaithful("Is Maker membership $85 per month?", "Is that per month?", before, "pronoun") or ""
    )


def test_an_answer_that_holds_none_of_an_elliptic_follow_ups_own_words_does_not_speak_to_it() -> None:
    own = ["larg"]
    assert not speaks_to(own, ["A small locker costs $10 per month."])
    assert speaks_to(own, ["A large locker costs $18 per month."])
    # The previous answer given again beside the new one: a claim of it holds none of the follow-up's words.
    assert not speaks_to(own, ["A small locker costs $10 per month.", "A large locker costs $18 per month."])
    assert speaks_to([], ["anything"])


def test_an_answer_to_a_weekend_follow_up_that_names_saturday_speaks_to_it() -> None:
    own = ["weekend"]
    assert speaks_to(own, ["On Saturday the makerspace is open from 9 am to 6 pm."])
    assert not speaks_to(own, ["From Tuesday to Friday the makerspace is open from 10 am to 10 pm."])
    assert speaks_to(["weekday"], ["From Tuesday to Friday the makerspace is open from 10 am to 10 pm."])


async def test_an_answer_that_says_the_previous_answer_again_without_the_follow_ups_words_repeats_it() -> None:
    said = "You will need supervisor approval before working extra hours."
    asked = "Do I need supervisor approval before working extra hours?"
    previous = Previous(standalone_question=asked, cited_passage_ids=["a"], earlier=[(asked, said)])
    out = await condense("What's the hourly rate for it?", previous, None, max_chars=500)
    assert out.asks == ["rate"] and out.previous_answer == said
    claims = [said, "Get your supervisor's approval in writing"]
    assert repeats_previous(out.asks, out.previous_answer, claims, " ".join(claims))
    # A new sentence that holds the follow-up's own word answers it, and so does the old one beside it.
    rated = [said, "Overtime is paid at an hourly rate of 1.5 times your basic pay."]
    assert not repeats_previous(out.asks, out.previous_answer, rated, " ".join(rated))
    # Nothing said before: not a repeat, whatever it holds.
    fresh = ["Overtime needs approval from your supervisor."]
    assert not repeats_previous(out.asks, out.previous_answer, fresh, " ".join(fresh))
    # A follow-up that checks a figure is answered by the documents' figure, which the previous answer may hold.
    checks = await condense("So it's $50 an hour, right?", previous, None, max_chars=500)
    assert checks.asks == []
    # A short question given the previous subject names too little of its own to hold.
    short = await condense("Can I go?", previous, None, max_chars=500)
    assert short.asks == []
    # The first turn, or a refused previous turn: nothing to repeat.
    assert not repeats_previous(out.asks, None, claims, " ".join(claims))


def test_ranks_are_fused_by_reciprocal_rank() -> None:
    assert fuse([["a", "b", "c"], ["c", "a", "d"]], 3) == ["a", "c", "b"]
