"""What each refusal or block reason says, in words: the one catalogue.

The pipeline puts a reason's `headline` and `message` on the AskResponse it returns (the message with the
particulars of the request added), and the page shows exactly those: the headline as the verdict's line
and the message as the explanation. A reason is worded here and nowhere else.
"""

from __future__ import annotations

import msgspec

from provenance.models import Reason

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
        "The documents don't support an answer",
        "A draft answer was written, but the checks did not find its claims to be a supported answer to this "
        "question: each claim must be backed by the retrieved passages and must answer what was asked. "
        "It was withheld.",
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
}

# A refusal whose every claim was a sentence of the documents: none was false, they just don't answer the
# question, so the not_grounded message would wrongly suggest an unsupported draft.
QUOTED_NOT_AN_ANSWER = (
    "The closest sentences in the documents are true but don't answer this question, so no answer is given. "
    "They are shown with the passages they come from."
)
