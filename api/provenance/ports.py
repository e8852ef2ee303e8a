"""Ports: the small protocols the pipeline stages call, the pipeline's contract with the model profiles; each
profile supplies real implementations. And the passage they all pass around (ScoredPassage)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol, runtime_checkable

import msgspec
import numpy as np

from provenance.wire import EvidenceSpan, JudgeRecord

# A stored passage's text and its sentence spans (code-point offsets, decided once at ingest; empty where none
# are stored): what the verifier learns a corpus's vocabulary from, without splitting a sentence again.
CorpusText = tuple[str, Sequence[tuple[int, int]]]


class Usage(msgspec.Struct, frozen=True):
    model: str
    input_tokens: int = 0
    output_tokens: int = 0


class ScreenVerdict(msgspec.Struct, frozen=True):
    label: Literal["ok", "injection", "off_topic"]
    score: float
    classifier: str
    usage: Usage | None = None


class Generation(msgspec.Struct, frozen=True):
    answer: str
    used_passage_ids: list[str]
    usage: Usage
    # The model's output was cut off at max_tokens and `answer` is its complete sentences up to the cut.
    cut_off: bool = False


class Decomposition(msgspec.Struct, frozen=True):
    claims: list[str]
    usage: Usage


class ClaimVerdict(msgspec.Struct, frozen=True):
    """One verifier's view of one claim: two judgments, kept apart.

    `support`: the probability that the passages state the claim, judged without the question (a claim is
    stated by the passages or it isn't, whatever was asked). `relevance`: the probability that the claim
    answers the question; None from a verifier that doesn't judge it."""

    support: float
    supporting_passage_ids: list[str]
    relevance: float | None = None
    # The claim is a sentence of a supporting passage, word for word: that the passages say it is certain.
    quoted: bool = False
    # Where the support check found the claim in each passage it read, best first: the window it scored.
    evidence: list[EvidenceSpan] = msgspec.field(default_factory=list)
    # The check that capped the support of the passage it rests on, when one did: a fact the passage doesn't
    # state, a flipped rule, a claim that isn't self-contained (`claims.support`).
    veto: str | None = None
    # The rules' support for the claim in each passage, best first: what a reading judge ranks and vetoes by.
    passages: list[PassageSupport] = msgspec.field(default_factory=list)
    # A reading judge's verdicts, when one judged the claim: then `support` and `relevance` are the judge's
    # (under the vetoes) and `local_support` is what the rules alone said.
    judge: JudgeRecord | None = None
    local_support: float | None = None
    local_relevance: float | None = None
    # The judge's relevance is no firm No (JUDGE_RELEVANCE=firm): the writer's own verdict, when it gave one, may
    # stand above it (`claims.verdict.combine`).
    writer_may_raise: bool = False


# A verdict a verifier left out counts as "not supported": verification fails closed.
MISSING_VERDICT = ClaimVerdict(support=0.0, supporting_passage_ids=[], relevance=0.0)


class Verification(msgspec.Struct, frozen=True):
    verdicts: list[ClaimVerdict]
    usage: Usage | None = None
    # A model's verdicts: the claims from this index on are not the model's but the answer's own sentences
    # that none of its claims covered, so the local verifier judges them alone. None: every claim is the
    # model's, and one it gave no verdict for scores 0.
    local_only_from: int | None = None


class SupportFeatures(msgspec.Struct, frozen=True):
    """What the rules' support check weighs (`claims.support`)."""

    # Mean over the claim's content words of how well the window holds each (exactly, as part of a
    # compound, or as a near-synonym), 0 to 1.
    coverage: float
    # What the claim says that the window doesn't: the sum over its words of what coverage misses.
    added: float
    # The claim's embedding similarity to the window's closest sentence.
    similarity: float


class PassageSupport(msgspec.Struct, frozen=True):
    passage_id: str
    score: float
    quoted: bool
    # The evidence: [start, end) in the passage's text of the window the score came from.
    start: int
    end: int
    features: SupportFeatures | None = None
    # Why the score was capped, when it was: "fact_not_stated", "negation_flipped" or "not_self_contained".
    veto: str | None = None


class SupportCheck(Protocol):
    """Do the passages state each claim? Judged without the question: a claim is stated by the passages or it
    isn't, whatever was asked. One score per claim per passage, with the window read and any veto. The rules
    (`claims.support.RuleSupport`) are one; a verifier takes whichever it is given."""

    name: str

    def check(self, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> list[list[PassageSupport]]: ...

    def set_corpus(self, passages: Sequence[CorpusText]) -> None: ...


class Screener(Protocol):
    name: str

    async def classify(self, question: str, passages: Sequence[ScoredPassage]) -> ScreenVerdict: ...


class Generator(Protocol):
    name: str

    async def generate(self, question: str, passages: Sequence[ScoredPassage]) -> Generation: ...


class Condensation(msgspec.Struct, frozen=True):
    """A follow-up rewritten as a question that stands alone."""

    standalone: str
    usage: Usage


class Condenser(Protocol):
    """One model call: the follow-up as a standalone question, from the earlier turns' questions and the
    answers that were answered (a refused answer's text was never kept)."""

    name: str

    async def condense(self, question: str, earlier: Sequence[tuple[str, str | None]]) -> Condensation: ...

    def worst_case(self) -> Usage: ...


class Decomposer(Protocol):
    name: str

    async def decompose(self, question: str, answer: str) -> Decomposition: ...


class Verifier(Protocol):
    name: str

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification: ...


class SentenceScore(msgspec.Struct, frozen=True):
    """How well one sentence of a passage answers the question: [start, end) in the passage's text."""

    start: int
    end: int
    score: float


@runtime_checkable
class RanksSentences(Protocol):
    """A verifier that can say how well each sentence of a passage answers the question, as it judges a
    claim's relevance: what a refusal shows as the sentence closest to the question. A verifier without it
    is stood in for by embedding similarity (stages/closest.py)."""

    async def sentence_relevance(
        self, question: str, passages: Sequence[ScoredPassage]
    ) -> list[list[SentenceScore]]: ...


class DecomposeAndVerify(Protocol):
    """Claim decomposition and model entailment in one model call (one round trip instead of two).

    Returns one verdict per claim, in the claims' order; the call's usage is on the Decomposition only.
    """

    name: str

    async def decompose_and_verify(
        self, question: str, answer: str, passages: Sequence[ScoredPassage]
    ) -> tuple[Decomposition, Verification]: ...


class JudgeHandle(msgspec.Struct, frozen=True):
    """The reading judge a profile runs (`provenance.claims.judge`), as the service sees it: what /healthz names,
    and what it stops when it stops."""

    model: str
    # "local" (served by this service), or the judge's server.
    server: str
    calibrated: bool
    # Stops what the judge runs (its model server).
    close: Callable[[], None]
    # Why the judge can't answer, once something it runs has failed for good; None while it can.
    failure: Callable[[], str | None]


class Profile(msgspec.Struct, frozen=True, kw_only=True):
    """What a model profile provides to the pipeline."""

    name: str
    screener: Screener
    generator: Generator
    # Scores every claim on this machine (the feature or the trained verifier), whatever the profile.
    verifier: Verifier
    # The most one request's paid calls can use, one Usage per call at its token limits, given the most
    # tokens the retrieved passages can hold (by our tokenizer): what the spend cap holds against the daily
    # budget before the request runs. None for a profile whose calls all run on this machine and cost nothing.
    # Required, so that no profile is taken for free by omission.
    worst_case: Callable[[int], Sequence[Usage]] | None
    # Whether the screener reads the retrieved passages (the local one weighs the question against them), so
    # screening waits for retrieval; otherwise the two run side by side. Required, like worst_case: a
    # profile that got it wrong would screen without the evidence it needs, or wait for nothing.
    screener_reads_passages: bool
    # What, beside its name, changes this profile's answers (the model it calls, its verifier's weights): part
    # of the answer cache's key, so that an answer is never served from another model.
    cache_tag: str = ""
    # How the answer becomes claims, exactly one of the two: a decomposer, or one model call that gives the
    # claims with the model's own entailment verdicts, which then count beside `verifier`'s.
    decomposer: Decomposer | None = None
    decompose_and_verify: DecomposeAndVerify | None = None
    # Told the vectors ingest stored for the retrieved passages' sentences, as (sentence text, vector), before
    # the verifier reads them: the local verifier's sentence cache, so nothing is embedded twice.
    sentence_vectors: Callable[[Iterable[tuple[str, np.ndarray]]], None] | None = None
    # Told the stored word vectors (word, vector) when the corpora are (re)loaded, before `on_corpus`: the
    # local verifier's vocabulary, read rather than embedded at start-up.
    word_vectors: Callable[[Iterable[tuple[str, np.ndarray]]], None] | None = None
    # Told the corpus's passages (text, stored sentence spans) whenever the corpus is (re)loaded; the local
    # verifier learns its vocabulary.
    on_corpus: Callable[[Sequence[CorpusText]], None] | None = None
    # The reading judge (JUDGE), when one judges this profile's claims: what /healthz names, and what the
    # service stops (its model server) when it stops.
    judge: JudgeHandle | None = None
    # The most tokens of passages (by our tokenizer) one model call's prompt holds, each passage cut to its
    # sentences closest to the question (stages/prompt_passages.py); 0: every passage whole. The prompt only:
    # every check reads the passages whole.
    passage_tokens: int = 0
    # Rewrites a follow-up with one model call (stages/condense.py); None: the local method, no model.
    condenser: Condenser | None = None

    @property
    def paid(self) -> bool:
        """Whether any call costs money: one rule, so a paid profile can't leave its worst case undeclared."""
        return self.worst_case is not None

    def __post_init__(self) -> None:
        if (self.decomposer is None) == (self.decompose_and_verify is None):
            raise ValueError(f"profile {self.name!r} needs exactly one of decomposer and decompose_and_verify")


class ScoredPassage(msgspec.Struct, frozen=True):
    """The passage as retrieval hands it to every later stage: what the pipeline, the profiles and the
    verifiers read. It has no SQL in it; the data-access module builds it from rows."""

    id: str
    source: str
    heading: str
    text: str
    score: float
    pages: list[int] | None = None  # the pages of a paged source (PDF) it came from, in order
    # Its sentence units as [start, end) offsets into `text`, as ingest decided them (passage_sentences);
    # empty when none are stored (a passage built in a test, or text quarantine rewrote): then
    # `provenance.text.sentence_spans` decides them from the text, by the same rule.
    sentences: tuple[tuple[int, int], ...] = ()
