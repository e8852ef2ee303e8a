"""What kind of answer a question asks for (an amount, a share, a time of day, a date, a count, a span, a
person, an address), and whether a claim gives it. Read by the lexical stage's `wrong_answer_type` cap, the
local verifier's features and quoted-answer relevance, and the extractive generator. A change here is checked
against every question whose kind it changes (`python -m evals.answer_types --against REV`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from provenance import text as T

_DAY = re.compile(rf"\b({'|'.join(T.DAYS)}|weekend|weekday)s?\b", re.I)
_MONEY = re.compile(
    r"[$£€]\s?\d|\b\d+(\.\d+)?\s?(dollars|usd|pounds|euros)\b|\bfree\b|\bno (extra )?(cost|charge)", re.I
)
# A span of time: a count of units ("two working days", "a four-week course", "90 days", "half an hour").
_DURATION = re.compile(
    r"\b(\d+(\.\d+)?|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    r"forty|sixty|ninety|several|few|half an?)[\s-]+(full[\s-]+|calendar[\s-]+|working[\s-]+|business[\s-]+)?"
    r"(seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|fortnights?|months?|years?|semesters?|terms?|sessions?)\b",
    re.I,
)
# A span given per unit of time ("6 hours per week", "two days a month"): an allowance, not how long a thing takes.
_PER = re.compile(r"^\s+(per|a|an|each|every)\s+(day|week|fortnight|month|year|term|semester|session)\b", re.I)
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b|\bcentur(y|ies)\b", re.I)
# A question that asks for a kind of thing (not yes or no) opens with one of these.
_WH = re.compile(r"^\W*(how|what|what's|when|where|which|who|whom|whose)\b", re.I)


# "How much of the premium does the company pay?" asks for a part of a whole: a share or an amount.
_SHARE_ASKED = re.compile(
    r"\bhow much of (the|a|an|my|your|our|their|his|her|its|this|that|each|every)\b"
    r"|\bwhat (percent(age)?|share|portion|part|fraction|proportion)\b"
)
# "How many" asks for a count, unless it counts money.
_COUNT_ASKED = re.compile(r"\bhow many\b(?!\s+(dollars|cents|pounds|pence|euros)\b)")
# A question opening with these asks for a person, a date, a place, a reason or a choice, whatever amounts it names
# ("Who can't pay the pharmacists?", "When did they raise the price of oil?", "Which tier costs $45?").
_ASKS_WHO_WHEN_WHERE = re.compile(r"^\W*(who|whom|whose|when|where|why|which)\b")
# "Pay" as the verb or the wage asks for an amount; "pay" naming a period or a date ("each pay period") doesn't.
_MONEY_ASKED = re.compile(
    r"\bhow much (is|are|does|do|did|will|would|to|for|money|it)\b|\bcost\b|\bprice\b|\bfee\b|\bcharge\b"
    r"|\bpay\b(?![\s-]+(periods?|days?|dates?|schedules?|grades?|stubs?|slips?|cycles?)\b)"
)
_SHARE = re.compile(
    r"\d\s?%|\bpercent\b|\b\d+\s?/\s?\d+\b|\b(half|halves|third|thirds|quarter|quarters|all|none|entire|full)\b", re.I
)


# A question asking when: opening with it ("When...", "What year..."), or asking it beside another ("Where and
# when...", "...and when is it due?"), or "when" with an auxiliary after it ("...when did it open?").
_WHEN_ASKED = re.compile(
    r"^\W*(when|(what|which) (year|date|day|month|decade|century))\b"
    r"|^\W*what (is|was|are|were) the (year|date|day|month|century)\b"
    r"|\b(in|during) (what|which) (year|month|decade|century)\b"
    r"|\b(and|or) when\b|\bwhen (is|are|was|were|do|does|did|will|would|can|could|should|must|has|have|had|may)\b"
)
# A question opening with another wh-word asks that: its "when" opens a clause ("What schedule am I on when I
# start?", "Who led the troops when Cyprus was conquered?").
_OTHER_WH = re.compile(r"^\W*(what|what's|which|who|whom|whose|where|why|how)\b")


_OPEN_OR_CLOSE = re.compile(r"\b(open|opens|close|closes)\b")
# Opening or closing in the past, or in a year, is a date ("When did the stadium open?").
_OPENED_ON_A_DATE = re.compile(r"\b(did|has|have|had)\b|\b(what|which) (year|month|decade|century)\b")
# Opening hours asked for: when (now), until when, on which day, how late.
_HOURS_OF_OPENING = re.compile(
    rf"^\W*when (is|are|does|do|will|can)\b|\b(until|till|late|early|today|tonight|tomorrow|weekends?|weekdays?)\b"
    rf"|\b({'|'.join(T.DAYS)})s?\b"
)


# An hour as a unit ("per hour", "a 24 hour period", "an hour long", "kilowatt hour"), not a time of day.
_NO_HOUR = re.compile(r"\b(\d+|an?|one|per|kilowatt)[\s-]+hours?\b|\bhours?[\s-]+(long|period)\b")
# Something opening or closing, asked with a verb before it ("does it open", "is the shop closed").
_OPENS_OR_CLOSES = re.compile(r"\b(does|do|is|are|will|can)\b.*\b(open|opens|close|closes)\b")


# A way to reach someone asked for: an email address or a phone number, or how to call or contact them. "Call"
# also names things ("What did Luther call the peasants?") and "contact" touches ("come in contact with").
_CONTACT_ASKED = re.compile(
    r"\b(e-?mail|phone|telephone|fax)\b|\b(call|contact|reach)\b.*\b(number|address)\b"
    r"|\b(number|address)\b.*\b(call|contact|reach)\b|^\W*(how|who|whom) (do|can|should|would|could) (i|we|you) "
    r"(call|contact|reach)\b"
)


def _asks_hours(q: str) -> bool:
    """Whether the question asks for a time of day: "what time", opening hours, or when a place opens or closes.
    "Open" and "close" name other things too ("open to everyone", "close to the coast", "an open system"): they
    ask for a time only in a question about opening hours, or one that opens with no wh-word a rule here reads
    ("wen does it open on saturdy"), never about an opening in the past."""
    if re.search(r"\bhow many hours\b", q):
        return False
    if re.search(r"\bwhat time\b(?!\s+(period|frame|span|scale)s?\b)", q) or re.search(
        r"\bhours?\b", _NO_HOUR.sub(" ", q)
    ):
        return True
    if not _OPEN_OR_CLOSE.search(q) or _OPENED_ON_A_DATE.search(q):
        return False
    return bool(
        _HOURS_OF_OPENING.search(q) or (not (_WH.match(q) or _OTHER_WH.search(q)) and _OPENS_OR_CLOSES.search(q))
    )


def _asks_when(q: str) -> bool:
    return bool(_WHEN_ASKED.search(q) or (re.search(r"\bwhen\b", q) and not _OTHER_WH.search(q)))


def expected_answer_type(question: str) -> str | None:
    q = question.lower()
    if _SHARE_ASKED.search(q):
        return "share"
    # "How much is a day pass?" asks for an amount; "How much notice do I give?" doesn't. "How many bags will
    # travel pay for?" asks for a count, whatever else it names.
    if not _COUNT_ASKED.search(q) and not _ASKS_WHO_WHEN_WHERE.match(q) and _MONEY_ASKED.search(q):
        return "money"
    if _asks_hours(q):
        return "time"
    if re.search(r"\bhow long (does|do|did|will|would|should|can|could|might|may)\b.*\btakes?\b", q):
        # "How long does the induction take?" asks how long a thing lasts: "up to 6 hours per week" is an
        # allowance, not that.
        return "elapsed"
    if re.search(r"\bhow long\b", q) and not re.search(r"\bhow long (is|are) (the|a|an|my|your|our|their)\b", q):
        # "How long do I have to wait?" asks for a span of time: a number alone ("at 6 pm") is not one.
        # "How long is the table?" may ask for a length, so a number still answers it.
        return "duration"
    if re.search(r"\bhow (many|long|old|often|far|big|large)\b|\bminimum\b|\bmaximum\b|\blimit\b", q):
        return "number"
    if _asks_when(q):
        return "date"
    if _CONTACT_ASKED.search(q):
        return "contact"
    if re.search(r"^(who|whom|whose)\b", q):
        return "person"
    return None


def answer_type_match(kind: str | None, claim: str) -> float:
    if kind is None:
        return 1.0
    if kind == "money":
        return 1.0 if _MONEY.search(claim) else 0.0
    if kind == "share":
        return 1.0 if _SHARE.search(claim) or _MONEY.search(claim) else 0.0
    if kind == "time":
        return 1.0 if T.TIME.search(claim) or _DAY.search(claim) else 0.0
    if kind == "number":
        return 1.0 if T.bare_numbers(claim) else 0.0
    if kind == "duration":
        return 1.0 if _DURATION.search(claim) else 0.0
    if kind == "elapsed":
        return 1.0 if any(not _PER.match(claim[m.end() :]) for m in _DURATION.finditer(claim)) else 0.0
    if kind == "date":
        return 1.0 if T.months(claim) or _YEAR.search(claim) or _DAY.search(claim) or T.bare_numbers(claim) else 0.0
    if kind == "contact":
        return 1.0 if T.emails(claim) or re.search(r"\d{3}[ -]?\d{3,4}", claim) else 0.0
    if kind == "person":
        return 1.0 if T.entities(claim) else 0.0
    return 1.0


# The kinds of answer a claim can be checked for without reading it.
CHECKABLE_TYPES = frozenset({"money", "share", "time", "date"})


def wrong_answer_type(question: str, claims: Sequence[str]) -> str | None:
    """The kind of answer a wh-question asks for ("how much": an amount) when no claim is of that kind. None
    when a claim is, when a part of the question asks yes or no ("Do I still pay for my locker?" is answered
    by a rule, not a price), or asks for a kind that needs reading to check."""
    kinds = []
    for part in T.sub_questions(question):
        kind = expected_answer_type(part) if _WH.match(part) else None
        if kind not in CHECKABLE_TYPES or any(answer_type_match(kind, c) for c in claims):
            return None
        kinds.append(kind)
    return kinds[0] if kinds else None
