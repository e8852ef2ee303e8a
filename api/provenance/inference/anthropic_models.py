"""Which Claude model judges under JUDGE=anthropic when JUDGE_MODEL is unset: another than the one that writes.
Its own module because both the judge (`claims.judge`) and the spend cap's prices (`inference.pricing`) need the
answer, and the prices sit below the judge."""

from __future__ import annotations

from provenance.settings import Settings

# The writer's default is Haiku: the judge's is the next model up, so that by default they differ. A writer set to
# this model gets Haiku as its judge instead.
DEFAULT_JUDGE_MODEL = "claude-sonnet-4-6"
OTHER_JUDGE_MODEL = "claude-haiku-4-5"


def default_judge_model(writer: str) -> str:
    """JUDGE_MODEL's default under JUDGE=anthropic: a Claude model other than ANTHROPIC_MODEL."""
    return OTHER_JUDGE_MODEL if writer.lower() == DEFAULT_JUDGE_MODEL else DEFAULT_JUDGE_MODEL


def claude_judge_model(settings: Settings) -> str:
    """The model a JUDGE=anthropic judge calls: JUDGE_MODEL, or the default beside ANTHROPIC_MODEL."""
    return settings.judge.model or default_judge_model(settings.anthropic.model)
