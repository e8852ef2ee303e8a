"""What each refusal or block reason says, in words: the one catalogue.

The pipeline puts a reason's `headline` and `message` on the AskResponse it returns (the message with the
particulars of the request added), and the page shows exactly those: the headline as the verdict's line
and the message as the explanation. A reason is worded here and nowhere else.
"""

from __future__ import annotations

import msgspec

from provenance.wire import Reason, Stages

# What a client turned away for its hourly limit or the day's budget can still get; the pipeline adds it to
# the rate limit's own words.
STILL_SERVED = "Questions already answered are still served."


class ReasonText(msgspec.Struct, frozen=True):
    # A few words, no full stop: what happened ("The documents don't support an answer").
    headline: str
    # One or two sentences that don't repeat the headline: why, and what to do now.
    message: str


REASONS: dict[Reason, ReasonText] = {
    "not_grounded": ReasonText(
        "The documents don't say this",
        "A draft answer was written, but the retrieved passages don't state all of its claims, so it was "
        "withheld. Every claim of an answer must be stated by the documents.",
    ),
    "not_an_answer": ReasonText(
        "This doesn't answer your question",
        "A draft answer was written and its claims are in the documents, but none of them answers what was "
        "asked, so it was withheld.",
    ),
    "no_answer": ReasonText(
        "The documents don't contain an answer",
        "Nothing in the retrieved passages answers this question, so no answer was written.",
    ),
    "injection": ReasonText(
        "The question looks like an attempt to change the rules",
        "It was screened out as a possible prompt injection, and nothing was answered.",
    ),
    "off_topic": ReasonText(
        "The question is outside what the documents cover",
        "It was screened out as off-topic for this collection of documents.",
    ),
    "rate_limited": ReasonText(
        "Too many questions this hour",
        f"There is a limit on how many new questions can be asked per hour. {STILL_SERVED}",
    ),
    "budget_exhausted": ReasonText(
        "The service's spending cap has been reached",
        f"No more model calls can be made until today's budget resets. {STILL_SERVED}",
    ),
    "bot_check_failed": ReasonText(
        "The bot check didn't pass",
        "Complete the check (or reload the page), then ask again. Apps other than the page send an API key instead.",
    ),
    "invalid_api_key": ReasonText(
        "The API key wasn't accepted",
        "The key sent with the question is unknown or has been revoked. Ask the service's operator for a valid one.",
    ),
    "model_error": ReasonText(
        "The language model didn't respond",
        "No answer could be written or checked. Please try again shortly.",
    ),
    "bad_rewrite": ReasonText(
        "The follow-up couldn't be made into a question",
        "Rewriting it as a question that stands on its own, from the conversation so far, didn't give a usable "
        "question, so nothing was searched or answered. Ask it again in full.",
    ),
    "judge_error": ReasonText(
        "The answer couldn't be checked",
        "The model that checks each claim against the documents didn't respond, so no answer is given "
        "unchecked. Please try again shortly.",
    ),
}

# A refusal for relevance whose verdict was uncertain rather than low: the claims are in the documents and may
# well answer, so the reader is told to check rather than that they don't answer.
UNCERTAIN = ReasonText(
    "This may not answer your question",
    "A draft answer was written and its claims are in the documents, but whether they answer what was asked "
    "is uncertain, so it was withheld rather than risk a wrong answer. The passages it drew on are shown: "
    "check them.",
)

# A refusal whose every claim was a sentence of the documents: none was false, they just don't answer the
# question, so the not_grounded message would wrongly suggest an unsupported draft.
QUOTED_NOT_AN_ANSWER = (
    "The closest sentences in the documents are true but don't answer this question, so no answer is given. "
    "They are shown with the passages they come from."
)


# A refusal for uncertain relevance whose every claim was a sentence of the documents, word for word: that the
# documents state it is certain, that it answers is not. Saying it doesn't answer would be wrong when it does
# (issue 47: "80% of the medical premium" refused as "true but doesn't answer"), so the reader is asked to judge.
QUOTED_UNCERTAIN = ReasonText(
    "The documents say this, but it may not answer your question",
    "The documents state these sentences word for word, but it could not be confirmed that they answer what "
    "was asked, so they are shown with their passages rather than given as the answer: check them.",
)


def left_out_note(missing: list[str]) -> str:
    """' The documents don't cover "Can I get a spare key?".' for what a partial answer leaves out: a
    generator's closing note, which decomposition drops as a claim about the documents."""
    if not missing:
        return ""
    end = "." if len(missing) == 1 else " either."
    return " The documents don't cover " + " or ".join(f'"{p}"' for p in missing) + end


def _text(reason: Reason, stages: Stages) -> ReasonText:
    g = stages.gate
    if reason == "not_an_answer" and g.relevance is not None and g.relevance >= g.relevance_uncertain:
        return QUOTED_UNCERTAIN if g.claims and all(c.quoted for c in g.claims) else UNCERTAIN
    return REASONS[reason]


def headline_for(reason: Reason | None, stages: Stages) -> str | None:
    return None if reason is None else _text(reason, stages).headline


def explain(reason: Reason | None, stages: Stages, detail: str | None = None) -> str | None:
    """The message a refused or blocked response carries: the reason's words with this request's
    particulars (the gate's figures, the model's failure, when to come back)."""
    if reason is None:
        return None
    text = _text(reason, stages)
    message = text.message
    g = stages.gate
    if reason == "not_an_answer" and text is REASONS[reason] and g.claims and all(c.quoted for c in g.claims):
        message = QUOTED_NOT_AN_ANSWER
    if reason in ("not_grounded", "not_an_answer") and g.detail:
        message = f"{message} ({g.detail})"
    if detail and reason in ("model_error", "judge_error", "bad_rewrite"):
        message = f"{message} ({detail})"
    if reason == "rate_limited" and stages.rate_limit.detail:
        # The stage says the real window and when to come back, in words ("try again in 36 minutes").
        said = stages.rate_limit.detail
        message = f"{said[0].upper()}{said[1:]}. {STILL_SERVED}"
    return message
