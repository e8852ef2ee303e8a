"""What a model profile asks a model for, whoever serves it: the structured outputs as msgspec structs whose
JSON schemas are generated from them (`tool_schema`), so the schema a model is given and the parse of its reply
can't drift apart; and what a reply becomes (`parse_output`, `generation`, `checked_claims`), the same for every
model profile. The prompts that ask for them are `profiles.prompts`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, TypeVar

import msgspec

from provenance.errors import ModelOutputError
from provenance.ports import ClaimVerdict, Decomposition, Generation, ScoredPassage, Usage, Verification

SCREEN_TOOL = "classify_question"
CONDENSE_TOOL = "submit_standalone_question"
ANSWER_TOOL = "submit_answer"
CHECKED_CLAIMS_TOOL = "submit_checked_claims"

# The schema tells the model the range; the parse doesn't enforce it (a 1.2 is clamped, not a failure).
_RANGE = {"minimum": 0, "maximum": 1}
Probability = Annotated[float, msgspec.Meta(extra_json_schema=_RANGE)]
PassageIds = list[str]

_T = TypeVar("_T")


class ScreenOut(msgspec.Struct):
    label: Literal["ok", "injection", "off_topic"]
    confidence: Probability


class CondenseOut(msgspec.Struct):
    standalone_question: Annotated[
        str, msgspec.Meta(description="The follow-up as one question that can be understood without the conversation.")
    ]


class AnswerOut(msgspec.Struct):
    answer: Annotated[str, msgspec.Meta(description='The answer, or "" when the passages do not answer.')]
    used_passage_ids: PassageIds = msgspec.field(default_factory=list)


class CheckedClaimOut(msgspec.Struct):
    claim: str
    supported_probability: Annotated[
        float, msgspec.Meta(description="Probability that the passages state the claim.", extra_json_schema=_RANGE)
    ]
    supporting_passage_ids: PassageIds = msgspec.field(default_factory=list)
    # Asked apart from support: whether the claim answers the question is the model's own verdict, the one
    # place a model grades its own output; whether the passages state it is also judged on this machine.
    # Optional in the parse, so a model that leaves it out is taken as not saying the claim answers.
    relevance_probability: Annotated[
        float,
        msgspec.Meta(description="Probability that the claim answers the question asked.", extra_json_schema=_RANGE),
    ] = 0.0


class CheckedClaimsOut(msgspec.Struct):
    claims: list[CheckedClaimOut]


class Tool(msgspec.Struct, frozen=True):
    name: str
    description: str
    output: type[msgspec.Struct]

    @property
    def schema(self) -> dict[str, Any]:
        return tool_schema(self.output)


SCREEN = Tool(SCREEN_TOOL, "Record the screening label for the question.", ScreenOut)
CONDENSE = Tool(CONDENSE_TOOL, "Submit the follow-up rewritten as a standalone question.", CondenseOut)
ANSWER = Tool(
    ANSWER_TOOL, "Submit the answer (empty when the passages do not answer) and the passage ids used.", AnswerOut
)
CHECKED_CLAIMS = Tool(
    CHECKED_CLAIMS_TOOL,
    "Submit the answer's claims, each with how well the passages support it and whether it answers the question.",
    CheckedClaimsOut,
)


def tool_schema(output: type[msgspec.Struct]) -> dict[str, Any]:
    """The struct's JSON schema, with references inlined, titles and defaults dropped and every property
    required: the plain shape every structured-output implementation accepts."""
    generated = msgspec.json.schema(output)
    definitions: dict[str, Any] = generated.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return resolve(definitions[node["$ref"].rsplit("/", 1)[-1]])
            out = {k: resolve(v) for k, v in node.items() if k not in ("title", "default")}
            if out.get("type") == "object" and "properties" in out:
                out["required"] = list(out["properties"])
            return out
        if isinstance(node, list):
            return [resolve(v) for v in node]
        return node

    schema: dict[str, Any] = resolve(generated)
    return schema


def clamp(p: float) -> float:
    if p != p:  # NaN
        return 0.0
    return min(1.0, max(0.0, p))


def known_ids(ids: Sequence[str], allowed: Sequence[str]) -> list[str]:
    """Only ids of passages actually given, once each, in first-mentioned order."""
    valid = set(allowed)
    out: list[str] = []
    for pid in ids:
        pid = pid.strip()
        if pid in valid and pid not in out:
            out.append(pid)
    return out


# The metrics' name for each call: short, and without the space "claim checking" has in messages.
_CALL_NAMES = {"screening": "screening", "generation": "generation", "claim checking": "claims"}


def call_name(what: str) -> str:
    return _CALL_NAMES.get(what, "other")


def parse_output(
    raw: Mapping[str, object], kind: type[_T], usage: Usage, what: str, list_fields: Sequence[str] = ()
) -> _T:
    """The model's structured output as `kind`, or ModelOutputError (the call was billed: `usage`)."""
    data: dict[str, Any] = dict(raw)
    for field in list_fields:
        # Models sometimes send an array argument as a JSON-encoded string; accept that one slip.
        value = data.get(field)
        if isinstance(value, str) and value.lstrip().startswith("["):
            with contextlib.suppress(ValueError):
                data[field] = json.loads(value)
    try:
        return msgspec.convert(data, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise ModelOutputError(f"{what}: malformed tool output ({exc})", usage, call=call_name(what)) from None


def generation(out: AnswerOut, passages: Sequence[ScoredPassage], usage: Usage) -> Generation:
    """The answer, citing only passages it was given; an empty answer cites none."""
    answer = out.answer.strip()
    used = known_ids(out.used_passage_ids, [p.id for p in passages]) if answer else []
    return Generation(answer=answer, used_passage_ids=used, usage=usage)


def checked_claims(
    out: CheckedClaimsOut, passages: Sequence[ScoredPassage], usage: Usage
) -> tuple[Decomposition, Verification]:
    """The raw claims, each with the model's verdict: the decomposition stage cleans them and records what it
    drops. The call's usage is on the Decomposition only, so summing both never charges it twice."""
    ids = [p.id for p in passages]
    claims = [item.claim for item in out.claims]
    verdicts = [
        ClaimVerdict(
            support=clamp(item.supported_probability),
            supporting_passage_ids=known_ids(item.supporting_passage_ids, ids),
            relevance=clamp(item.relevance_probability),
        )
        for item in out.claims
    ]
    return Decomposition(claims=claims, usage=usage), Verification(verdicts=verdicts, usage=None)
