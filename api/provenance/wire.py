"""Wire types. Every struct is camelCase on the wire; AskResponse is the one object /ask returns."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated, Literal

import msgspec

Status = Literal["answered", "refused", "blocked"]
Reason = Literal[
    "not_grounded",
    "not_an_answer",
    "no_answer",
    "injection",
    "off_topic",
    "rate_limited",
    "budget_exhausted",
    "bot_check_failed",
    "invalid_api_key",
    "model_error",
    "judge_error",
    "bad_rewrite",
]
StageStatus = Literal["ok", "skipped", "blocked", "failed", "hit", "miss"]


class Wire(msgspec.Struct, rename="camel", kw_only=True):
    pass


# The characters no string a request carries may hold (provenance.http.inputs refuses them, and says why):
# NUL, and every other C0 control but tab, line feed and carriage return, DEL and the C1 controls.
CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
NO_CONTROLS = f"[^{CONTROLS}]"
# The JSON Schema pattern of a string with no rule of its own (the OpenAPI document gives it to every one).
TEXT_PATTERN = f"^{NO_CONTROLS}*$"

# A question needs a character that is not whitespace, and holds no control character (TEXT_PATTERN's).
# The OpenAPI document declares this very expression, and the /ask handler checks it, so the two agree.
QUESTION_PATTERN = f"^{NO_CONTROLS}*[^{CONTROLS}\\s]{NO_CONTROLS}*$"


# A corpus name: what `provenance ingest --corpus` accepts and the corpus_state table's CHECK (004_corpora.sql).
CORPUS_NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"
CORPUS_NAME_MAX_CHARS = 40
CorpusName = Annotated[
    str,
    msgspec.Meta(
        pattern=CORPUS_NAME_PATTERN,
        max_length=CORPUS_NAME_MAX_CHARS,
        description="a corpus from GET /corpora; the default corpus when absent",
    ),
]


# Cloudflare documents a Turnstile token as at most 2048 characters; a longer one can't be one, and is
# refused before it is sent to siteverify.
TURNSTILE_TOKEN_MAX_CHARS = 2048
TurnstileToken = Annotated[
    str,
    msgspec.Meta(
        max_length=TURNSTILE_TOKEN_MAX_CHARS,
        description=f"the Turnstile widget's token, at most {TURNSTILE_TOKEN_MAX_CHARS} characters",
    ),
]

# A conversation's id (provenance.conversations): 32 URL-safe characters of 192 random bits, as the server gave it.
CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9_-]{32}$"
ConversationId = Annotated[
    str,
    msgspec.Meta(
        pattern=CONVERSATION_ID_PATTERN,
        min_length=32,
        max_length=32,
        description="a previous response's conversationId: the question is a follow-up in that conversation",
    ),
]


class AskRequest(Wire, forbid_unknown_fields=True):
    question: str
    turnstile_token: TurnstileToken | None = None
    corpus: CorpusName | None = None
    conversation_id: ConversationId | None = None


# --- stages -------------------------------------------------------------------------------------
# Each stage says whether it ran (`status`), how long it took (`ms`) and, when skipped, why (`detail`).


class BotCheckStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    method: Literal["turnstile", "api_key", "none"] = "none"


class RateLimitStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    limit: int | None = None
    remaining: int | None = None
    retry_after_s: int | None = None


class AdmissionStage(Wire):
    """The wait for one of the ASK_CONCURRENCY pipeline slots; `ms` is the time spent waiting."""

    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    running: int | None = None
    waiting: int | None = None


class CondenseStage(Wire):
    """A follow-up made into what is searched for and what relevance is judged against (stages/condense.py):
    rewritten by one model call, or, in the local profile, the follow-up fused with the previous question.
    Runs from a conversation's second turn; the previous turn's cited passages join the candidates."""

    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    method: Literal["model", "fused"] | None = None
    model: str | None = None
    standalone_question: str | None = None
    # The queries searched and fused by rank, when the method fuses rather than rewrites.
    queries: list[str] = msgspec.field(default_factory=list)
    carried_passage_ids: list[str] = msgspec.field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0


class CacheStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    cached_at: str | None = None


class SpendStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    budget_usd: float | None = None
    spent_usd: float | None = None
    estimate_usd: float | None = None
    charged_usd: float | None = None


class ScreeningStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    decision: Literal["pass", "block"] | None = None
    reason: Reason | None = None
    deny_list_match: str | None = None
    classifier: str | None = None
    label: str | None = None
    score: float | None = None


# Where a passage is in a paged source (PDF): every page it is on, first to last, counted from 1 as a
# viewer's page box counts them ("handbook.pdf, pp. 12–13"); null for sources without pages.
Pages = Annotated[list[Annotated[int, msgspec.Meta(ge=1)]] | None, msgspec.Meta(description="pages, for a PDF")]


class ClosestSentence(Wire):
    """On a refusal: the passage's sentence closest to the question, [start, end) in the passage's `text`, by
    the verifier's judgment of whether it answers the question (`relevance`), or, from a verifier that makes
    none, by embedding similarity to the question (`similarity`). Where the answer was not found, not a
    verdict that this sentence is it."""

    start: int
    end: int
    score: float
    by: Literal["relevance", "similarity"]


class RetrievedPassage(Wire):
    id: str
    source: str
    heading: str
    text: str
    score: float
    pages: Pages = None
    # Set on a refusal only (stages.closest).
    closest: ClosestSentence | None = None


class RetrievalStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    k: int = 0
    mode: str | None = None
    embed_model: str | None = None
    embed_ms: float | None = None
    passages: list[RetrievedPassage] = msgspec.field(default_factory=list)


class HeldBack(Wire):
    passage_id: str
    # Sentences of this passage that spoke to the model rather than about the world.
    sentences: int
    # Nothing else was left of the passage, so no later stage saw it at all.
    dropped: bool = False


class QuarantineStage(Wire):
    """Retrieved passages are data, not instructions: sentences in them addressed to the model are held back
    from every later stage (and from the retrieval record)."""

    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    decision: Literal["pass", "held_back"] | None = None
    held_back: list[HeldBack] = msgspec.field(default_factory=list)


class GenerationStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    empty: bool | None = None
    used_passage_ids: list[str] = msgspec.field(default_factory=list)
    # The passages' tokens (by our tokenizer) in the model's prompt, and the passages cut to their sentences
    # closest to the question to fit the profile's budget (`stages/prompt_passages.py`); None: no budget.
    prompt_passage_tokens: int | None = None
    cut_passage_ids: list[str] = msgspec.field(default_factory=list)
    # The model's output was cut off at max_tokens; the answer checked is its complete sentences up to the cut.
    cut_off: bool = False


class DecompositionStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    model: str | None = None
    claim_count: int = 0
    dropped: list[str] = msgspec.field(default_factory=list)
    # A model's claims with a number its answer lacks (dropped), and the answer's sentences with a number none
    # of its claims has (checked as claims of their own, at the end of the claims).
    not_in_answer: list[str] = msgspec.field(default_factory=list)
    added: int = 0


class EntailmentStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    verifiers: list[str] = msgspec.field(default_factory=list)
    # The reading judge's model, when one judged the claims, and whether its support is calibrated for it.
    judge: str | None = None
    judge_calibrated: bool | None = None


class LexicalStage(Wire):
    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    capped: int = 0


class EvidenceSpan(Wire):
    """Where in a passage a claim's support was found: [start, end) in the passage's `text` as the retrieval
    record shows it, in Unicode code points, of the window of one or two sentences the support check scored
    (a quoted claim's own sentence)."""

    passage_id: str
    start: int
    end: int


class ClaimResult(Wire):
    """One claim, judged twice, apart: whether the passages state it (`support`, judged without the question)
    and whether it answers the question (`relevance`)."""

    text: str
    support: float
    relevance: float
    supporting_passage_ids: list[str]
    lexical_overlap: float
    # Support as this machine's verifier judged it; the model's own verdicts, when a model gave them with
    # the claims. `relevance` is the model's verdict when there is one, else the local verifier's.
    local_support: float
    local_relevance: float | None = None
    model_support: float | None = None
    model_relevance: float | None = None
    # Why the support score was capped by a check that needs no reading.
    capped_by: str | None = None
    # Why the relevance score was capped: the question names a year, month or number the claim's support
    # lacks, asks for another kind of answer, or takes for granted what no passage states.
    relevance_capped_by: str | None = None
    # A sentence of a retrieved passage, word for word: what the documents say is certain.
    quoted: bool = False
    # The sentence or two of each supporting passage (`supporting_passage_ids`) that the support check read.
    evidence: list[EvidenceSpan] = msgspec.field(default_factory=list)
    # The rules' check that capped the claim's support in the passage it rests on: `fact_not_stated`,
    # `negation_flipped` or `not_self_contained` (which a reading judge decides for itself). A judge can't
    # overrule the first two.
    veto: str | None = None
    # The reading judge's verdicts, when one is configured (JUDGE): then `support` and `relevance` are its.
    judge: JudgeRecord | None = None


JudgeMethod = Literal["logprobs", "json"]
# Who the judge is beside the model that wrote the answer: another provider's model (or any judge of the local
# profile's extractive answers), another model of the writer's own provider (JUDGE=anthropic under the
# anthropic profile: "same provider, different model", never called independent), or the writer itself in a
# separate call.
JudgeRelation = Literal["independent", "same_provider", "same_model"]


class JudgeRecord(Wire):
    """What a reading judge said of one claim. `support` and `relevance` are the probabilities the gate reads
    (support calibrated for this judge model when `calibrated`); `raw_*` are P(Yes) as the model gave them.
    `method`: read from the first token's logprobs, or a constrained JSON verdict (a server without
    logprobs: then each is 0 or 1). `independent`: the judge is another model than the one that wrote the
    answer; false when the same model judged in a separate call. `relation` says how far apart they are."""

    model: str
    independent: bool
    method: JudgeMethod
    calibrated: bool
    support: float | None = None
    raw_support: float | None = None
    relevance: float | None = None
    raw_relevance: float | None = None
    # The passage whose judgment gave `support`.
    passage_id: str | None = None
    # Support judgments made for this claim (one per passage read; 0 for a quoted claim).
    judgments: int = 0
    detail: str | None = None
    relation: JudgeRelation = "independent"


Judgment = Literal["support", "relevance"]
# How the gate read relevance: the best claim's (a model judged it: its answer may carry context), or every
# claim's (the local verifier judged an extractive answer: each sentence was chosen as answering).
RelevanceRule = Literal["best", "every"]


class GateStage(Wire):
    """The gate's two rules: support (every claim: the mean and the weakest) and relevance (the answer answers
    the question: its most relevant claim). `failed` names the rule that refused; support is checked first."""

    status: StageStatus = "skipped"
    ms: float = 0.0
    detail: str | None = None
    score: float | None = None
    min_claim: float | None = None
    threshold: float = 0.70
    min_claim_threshold: float = 0.40
    relevance: float | None = None
    relevance_rule: RelevanceRule | None = None
    relevance_threshold: float = 0.70
    relevance_uncertain: float = 0.40
    decision: Literal["pass", "fail"] | None = None
    failed: Judgment | None = None
    claims: list[ClaimResult] = msgspec.field(default_factory=list)


class Stages(Wire):
    """In the order the pipeline runs them (pipeline.py); the page shows them in the order they are encoded."""

    bot_check: BotCheckStage = msgspec.field(default_factory=BotCheckStage)
    cache: CacheStage = msgspec.field(default_factory=CacheStage)
    rate_limit: RateLimitStage = msgspec.field(default_factory=RateLimitStage)
    admission: AdmissionStage = msgspec.field(default_factory=AdmissionStage)
    spend: SpendStage = msgspec.field(default_factory=SpendStage)
    # A follow-up's cache lookup comes after this stage (its key is the standalone question).
    condense: CondenseStage = msgspec.field(default_factory=CondenseStage)
    screening: ScreeningStage = msgspec.field(default_factory=ScreeningStage)
    retrieval: RetrievalStage = msgspec.field(default_factory=RetrievalStage)
    quarantine: QuarantineStage = msgspec.field(default_factory=QuarantineStage)
    generation: GenerationStage = msgspec.field(default_factory=GenerationStage)
    decomposition: DecompositionStage = msgspec.field(default_factory=DecompositionStage)
    entailment: EntailmentStage = msgspec.field(default_factory=EntailmentStage)
    lexical_check: LexicalStage = msgspec.field(default_factory=LexicalStage)
    # The gate's record; on the wire `groundedness`, the key clients read.
    gate: GateStage = msgspec.field(default_factory=GateStage, name="groundedness")


# Any one stage's record: what `Stages` holds, and what a streamed /ask sends as each stage completes.
StageRecord = (
    BotCheckStage
    | CacheStage
    | RateLimitStage
    | AdmissionStage
    | SpendStage
    | CondenseStage
    | ScreeningStage
    | RetrievalStage
    | QuarantineStage
    | GenerationStage
    | DecompositionStage
    | EntailmentStage
    | LexicalStage
    | GateStage
)


class Citation(Wire):
    passage_id: str
    source: str
    heading: str
    pages: Pages = None


class AskResponse(Wire):
    request_id: str
    question: str
    status: Status
    reason: Reason | None
    answer: str | None
    citations: list[Citation]
    cached: bool
    profile: str
    total_ms: float
    stages: Stages
    # Why it was refused or blocked, worded once in provenance.pipeline.reasons: a few words, then the explanation
    # with this request's particulars. Both null when answered.
    headline: str | None = None
    message: str | None = None
    corpus_version: str | None = None
    corpus: str | None = None
    # The conversation this response is a turn of (pass it back as `conversationId` to ask a follow-up), and
    # its turn, from 1; null only when the request was turned away before its client was known (the bot
    # check). `standaloneQuestion`: what was searched for and what relevance was judged against; on a first
    # turn, the question itself. All three belong to this request, never to a cached answer.
    conversation_id: str | None = None
    turn: int | None = None
    standalone_question: str | None = None


# --- other endpoints ----------------------------------------------------------------------------


class JudgeInfo(Wire):
    """The reading judge, as /healthz and the page name it."""

    model: str
    # "local" (served by this service), or the judge's server as JUDGE_BASE_URL names it.
    server: str
    # False: the judge's raw P(Yes) is the support score, with no calibration fitted for this model.
    calibrated: bool
    # False: the judge is the model that writes the answers, judging in a separate call.
    independent: bool
    # Why the judge can't answer now (its model server died for good); None while it can.
    failure: str | None = None
    relation: JudgeRelation = "independent"


class Health(Wire):
    status: Literal["ok", "degraded"]
    database: Literal["up", "down"]
    passages: int | None
    profile: str
    version: str
    embed_model: str
    corpus_version: str | None = None
    # The model the profile calls (`claude-haiku-4-5`, the openai profile's OPENAI_MODEL); empty for the
    # local profile, which calls none.
    model: str = ""
    # The reading judge (JUDGE); None when the rules judge alone.
    judge: JudgeInfo | None = None


class CorpusFile(Wire):
    source: str
    passages: int
    tokens: int


class CorpusExample(Wire):
    question: str
    # False for an example that shows a refusal: a question the corpus deliberately doesn't answer.
    covered: bool = True


class CorpusSummary(Wire):
    """What a corpus is about, in its own words (its README.md, else its headings), and what to ask it."""

    name: str
    title: str
    description: str
    examples: list[CorpusExample]
    passage_count: int
    version: str
    # Only keys granted it (and admins) see a private corpus at all.
    private: bool = False


class Corpora(Wire):
    default: str | None
    corpora: list[CorpusSummary]


class CorpusInfo(Wire):
    version: str | None
    model: str | None
    passage_count: int
    files: list[CorpusFile]
    ingested_at: str | None = None
    name: str | None = None
    title: str | None = None
    description: str | None = None
    examples: list[CorpusExample] = msgspec.field(default_factory=list)


class PassageOut(Wire):
    id: str
    source: str
    heading: str
    text: str
    token_count: int
    embedding_model: str
    pages: Pages = None


class PublicConfig(Wire):
    profile: str
    turnstile_site_key: str | None
    max_question_chars: int
    # The model the profile calls, as /healthz names it.
    model: str = ""
    # The reading judge, as /healthz names it.
    judge: JudgeInfo | None = None
    # Whether the page asks "Was this right?" under each answer and refusal (POST /feedback).
    feedback: bool = False


DEFAULT_CORPUS = "default"
_NAME = re.compile(CORPUS_NAME_PATTERN)


def valid_name(name: str) -> bool:
    return _NAME.match(name) is not None


def default_of(names: Collection[str], private: Collection[str] = frozenset()) -> str:
    """What /ask answers from without a `corpus`: "default" (what `make run` serves), else the first by name;
    of the public corpora only, so that a client never learns of a private one by leaving the name out."""
    public = [n for n in names if n not in private]
    if DEFAULT_CORPUS in public or not public:
        return DEFAULT_CORPUS
    return min(public)
