"""The trained reader and verifier (`LOCAL_MODELS=trained`): they load offline from the committed files and
order known pairs correctly. Real int8 ONNX models, no database."""

from __future__ import annotations

import pytest

from provenance import text as T
from provenance.claims import build_verifier
from provenance.claims.trained import TrainedVerifier, evidence_for
from provenance.inference.cross_encoders import READER_PATH, VERIFIER_PATH, as_prose, get_reader, load_calibration
from provenance.inference.embedder import Embedder
from provenance.pipeline.door import Pipeline
from provenance.ports import ScoredPassage
from provenance.profiles.local import build_local_profile
from provenance.profiles.local_trained import ReaderGenerator
from provenance.services import Services
from tests.claims.test_local_verifier import PASSAGE

# The locker passage the feature verifier's tests use too.
LOCKERS = PASSAGE
NORMANS = ScoredPassage(
    id="normans.md#1",
    source="normans.md",
    heading="Normans",
    text=(
        "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region "
        "in France. They were descended from Norse raiders and pirates from Denmark, Iceland and Norway who, "
        "under their leader Rollo, agreed to swear fealty to King Charles III of West Francia."
    ),
    score=0.9,
)


@pytest.fixture(scope="module")
def verifier(embedder: Embedder) -> TrainedVerifier:
    built = build_verifier("trained", embedder)
    assert isinstance(built.verifier, TrainedVerifier) and built.cache_tag == "trained"
    built.on_corpus([(LOCKERS.text, ()), (NORMANS.text, ())])
    return built.verifier


@pytest.fixture(scope="module")
def generator() -> ReaderGenerator:
    return ReaderGenerator(get_reader(), load_calibration())


def test_models_are_committed_small_int8_files() -> None:
    for path in (READER_PATH, VERIFIER_PATH):
        assert path.exists(), path
        assert 5_000_000 < path.stat().st_size < 30_000_000, path
    calibration = load_calibration()
    assert calibration.verifier_a > 0, "a higher verifier logit must mean more likely right"
    assert "validation" in calibration.source


@pytest.mark.parametrize(
    ("question", "passage", "expected"),
    [
        ("How much does a standard locker cost per month?", LOCKERS, "$14"),
        ("When did the Normans give their name to Normandy?", NORMANS, "10th and 11th centuries"),
        # The second epoch's reader answered "pirates from Denmark" here (the raiders' origin); the third's finds
        # their leader.
        ("Who led the Norse raiders?", NORMANS, "Rollo"),
        ("Which king did they swear fealty to?", NORMANS, "Charles III"),
    ],
)
async def test_the_reader_finds_the_answer_span(
    generator: ReaderGenerator, question: str, passage: ScoredPassage, expected: str
) -> None:
    spans = generator.reader.read(question, [LOCKERS.text, passage.text] if passage is NORMANS else [passage.text])
    assert expected in spans[0].text
    generation = await generator.generate(question, [passage])
    assert expected in generation.answer
    assert generation.used_passage_ids == [passage.id]
    # The answer is the whole sentence the span sits in, word for word.
    assert T.is_sentence_of(generation.answer, passage.text)


async def test_the_reader_says_nothing_when_the_passage_does_not_answer(generator: ReaderGenerator) -> None:
    for question in ("Can I bring my dog to the makerspace?", "Who was the first king of Norway?"):
        generation = await generator.generate(question, [LOCKERS])
        assert generation.answer == "" and generation.used_passage_ids == []


async def test_a_part_that_only_sets_the_scene_is_not_named_as_left_out(generator: ReaderGenerator) -> None:
    scene = await generator.generate("I'm new here. How much does a standard locker cost per month?", [LOCKERS])
    assert "$14" in scene.answer
    assert "don't cover" not in scene.answer
    # Two parts that both ask are still read apart, and the one the passage doesn't answer is named.
    two = await generator.generate("How much does a standard locker cost per month, and can I bring my dog?", [LOCKERS])
    assert "$14" in two.answer and 'don\'t cover "Can I bring my dog?"' in two.answer


async def test_the_verifier_prefers_the_answer_to_a_look_alike(verifier: TrainedVerifier) -> None:
    question = "When did the Normans give their name to Normandy?"
    answer = T.split_sentences(NORMANS.text)[0]
    look_alike = T.split_sentences(NORMANS.text)[1]
    right = (await verifier.verify(question, [answer], [NORMANS])).verdicts[0]
    wrong = (await verifier.verify(question, [look_alike], [NORMANS])).verdicts[0]
    # Both are sentences of the passage, so both are certainly stated: they differ on answering.
    assert right.quoted and wrong.quoted and right.support == wrong.support == 1.0
    assert right.relevance is not None and wrong.relevance is not None
    assert right.relevance > wrong.relevance
    assert right.supporting_passage_ids == [NORMANS.id]


async def test_a_quoted_sentence_that_answers_something_else_fails(verifier: TrainedVerifier) -> None:
    claim = "Lockers are rented by the calendar month at the front desk."
    assert T.is_sentence_of(claim, LOCKERS.text)
    off_topic = (await verifier.verify("Can I bring my dog to the makerspace?", [claim], [LOCKERS])).verdicts[0]
    on_topic = (await verifier.verify("Where do I rent a locker?", [claim], [LOCKERS])).verdicts[0]
    # Quoted, so certainly what the passage says, and still below the gate: it doesn't answer the question.
    assert off_topic.quoted and off_topic.support == 1.0
    assert on_topic.relevance is not None and off_topic.relevance is not None
    assert on_topic.relevance >= 0.70 > off_topic.relevance


async def test_a_changed_amount_scores_below_the_faithful_claim(verifier: TrainedVerifier) -> None:
    question = "How much does a standard locker cost per month?"
    faithful = (await verifier.verify(question, ["A standard locker costs $14 per month."], [LOCKERS])).verdicts[0]
    altered = (await verifier.verify(question, ["A standard locker costs $41 per month."], [LOCKERS])).verdicts[0]
    # A changed amount is a support failure (whatever the question), not a relevance one.
    assert altered.support < faithful.support
    assert altered.support < 0.40


def test_evidence_is_the_quoted_sentence_or_the_closest_ones() -> None:
    claim = "Lockers are rented by the calendar month at the front desk."
    assert evidence_for(claim, LOCKERS.text) == (claim, True)
    evidence, quoted = evidence_for("Rollo led the raiders.", NORMANS.text)
    assert not quoted and "Rollo" in evidence


def test_sentence_ranges_map_back_to_the_text() -> None:
    text = "- A standard locker costs $14 per month.\n- Lockers are rented monthly.\n\nThey came. From Norway!"
    ranges = T.sentence_ranges(text)
    assert [s for *_, s in ranges] == T.split_sentences(text)
    for start, end, sentence in ranges:
        assert " ".join(text[start:end].split()) == sentence
    at = text.index("$14")
    assert T.sentences_around(text, at, at + 3) == "A standard locker costs $14 per month."


def test_quoted_in_ignores_line_breaks_and_spacing_only() -> None:
    assert T.quoted_in("costs $14   per month.", LOCKERS.text)
    assert T.quoted_in("per month.\nLockers are rented", LOCKERS.text)
    assert not T.quoted_in("costs $15 per month.", LOCKERS.text)
    assert not T.quoted_in("Costs $14 per month.", LOCKERS.text)


def test_only_a_whole_sentence_counts_as_quoted() -> None:
    text = "If you join before May, the joining fee is $30. Otherwise it is $45."
    assert T.is_sentence_of("Otherwise it is   $45.", text)
    assert T.quoted_in("the joining fee is $30.", text)
    assert not T.is_sentence_of("the joining fee is $30.", text)


def test_the_reader_reads_markdown_as_prose_with_offsets_kept() -> None:
    text = "## Lockers\n\n- A **small** locker costs $8.\n1. Ask at the desk."
    prose = as_prose(text)
    assert len(prose) == len(text)
    assert "#" not in prose and "**" not in prose and "- " not in prose and "1." not in prose
    at = text.index("$8")
    assert prose[at : at + 2] == "$8"


async def test_the_whole_pipeline_runs_on_the_trained_models(corpus_services: Services) -> None:
    """LOCAL_MODELS=trained end to end over our corpus: the reader's answer is a quoted sentence checked by
    the trained verifier, and a question the handbook doesn't answer is never answered."""
    settings = corpus_services.settings.with_overrides(local_models="trained")
    embedder = corpus_services.embedder
    pipeline = Pipeline(settings, corpus_services.store, embedder, build_local_profile(embedder, "trained"))
    await pipeline.corpora.refresh()
    assert pipeline.settings_fingerprint() != corpus_services.pipeline.settings_fingerprint()

    located = (await pipeline.ask("Where do flammable liquids go?", request_id="trained-1", use_cache=False)).response
    assert located.stages.generation.model == "minilm-l6-reader-int8"
    assert located.stages.entailment.verifiers == ["local-trained-verifier"]
    claims = located.stages.gate.claims
    assert claims and all(c.quoted for c in claims)
    assert "flammables cabinet" in claims[0].text
    if located.status == "answered":
        assert located.answer and "flammables cabinet" in located.answer and located.citations

    for question in ("Can I bring my dog to the makerspace?", "What is the wifi password?"):
        r = (await pipeline.ask(question, request_id="trained-2", use_cache=False)).response
        assert r.status != "answered" and r.answer is None
