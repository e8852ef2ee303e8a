"""Screening: a deny-list (instant, free) and a classifier for injection and off-topic questions."""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec

from provenance.ports import ScoredPassage, Screener, ScreenVerdict, Usage
from provenance.timing import Timer
from provenance.wire import ScreeningStage

# Patterns of instruction override, prompt extraction and persona jailbreaks. Matching is on a normalised
# question (lower case, single spaces) so spacing and case tricks don't slip through. Each pattern needs
# the words that make it an attack ("ignore YOUR PREVIOUS instructions", "act as AN AI"), so a member's
# ordinary question ("what if I ignore the noise rules?", "can a member act as a host?") passes.
_QUALIFIER = r"(previous|prior|above|earlier|preceding|system|original|your|these|those|all|any)"
DENY_LIST: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("override", rf"\b(ignore|disregard|forget|override|bypass)\b( (all|any|the|your|my|of))? {_QUALIFIER}\b"
                     r".{0,20}\b(instructions?|prompts?|rules|guidelines|directions|context)\b"),
        ("override", r"\b(ignore|disregard|forget)( all| any)? (the|your|these) "
                     r"(documents?|handbook|sources?|passages?)\b"),
        ("prompt_extraction", r"\b(system|hidden|secret|initial) (prompt|instructions?)\b|\boriginal prompt\b"
                              r"|\byour (system )?(prompt|instructions)\b"),
        ("prompt_extraction", r"\b(reveal|print|show|repeat|output|leak|dump)\b.{0,30}\b(configuration|config|"
                              r"api keys?|secrets?|credentials)\b"),
        ("jailbreak", r"\b(jailbreak|dan mode|do anything now|developer mode|god mode|unfiltered|uncensored)\b"
                      r"|\b(with|have|has) no (rules|restrictions|filters|limits)\b|\bwithout (any )?(rules|"
                      r"restrictions|filters)\b"),
        ("jailbreak", r"\bpretend (you are|to be|you're)\b|\byou are now\b|\bact as (if you|an? (ai|assistant|"
                      r"chatbot|bot|model|unrestricted|different|new))\b|\b(let'?s|let us) role-?play\b"
                      r"|\brole-?play as\b|\brole-?play:"),
        ("override", r"\b(system override|sudo|admin mode)\b|^\s*(system|assistant)\s*:"),
        ("override", r"\b(answer|respond)\b.{0,30}\b(own knowledge|without (the )?(documents?|handbook|sources?))\b"),
    )
)  # fmt: skip


def deny_list_match(question: str) -> str | None:
    normalised = " ".join(question.lower().split())
    for name, pattern in DENY_LIST:
        if pattern.search(normalised):
            return name
    return None


class ScreenOutcome(msgspec.Struct, frozen=True):
    stage: ScreeningStage
    usage: Usage | None = None

    @property
    def usages(self) -> list[Usage]:
        return [] if self.usage is None else [self.usage]

    @property
    def blocked(self) -> bool:
        return self.stage.decision == "block"


def screen_deny_list(question: str) -> ScreenOutcome | None:
    """The free half of screening; a hit blocks before anything else (retrieval included) runs."""
    timer = Timer()
    match = deny_list_match(question)
    if match is None:
        return None
    return ScreenOutcome(
        ScreeningStage(
            status="blocked",
            ms=timer.ms,
            decision="block",
            reason="injection",
            deny_list_match=match,
            detail=f"the question matches the deny-list ({match.replace('_', ' ')})",
        )
    )


async def screen_classifier(question: str, screener: Screener, passages: Sequence[ScoredPassage]) -> ScreenOutcome:
    timer = Timer()
    verdict: ScreenVerdict = await screener.classify(question, passages)
    ms = timer.ms
    if verdict.label == "ok":
        stage = ScreeningStage(
            status="ok",
            ms=ms,
            decision="pass",
            classifier=verdict.classifier,
            label="ok",
            score=verdict.score,
        )
    else:
        stage = ScreeningStage(
            status="blocked",
            ms=ms,
            decision="block",
            reason=verdict.label,
            classifier=verdict.classifier,
            label=verdict.label,
            score=verdict.score,
            detail="the classifier judged the question "
            + ("an attempt to override the service's instructions" if verdict.label == "injection" else
               "unrelated to the documents"),
        )  # fmt: skip
    return ScreenOutcome(stage, verdict.usage)
