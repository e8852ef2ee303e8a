"""What paid model calls cost, in USD, for the daily spend cap.

Prices are list prices per million tokens. An unknown model is charged at the Claude Haiku 4.5 price
rather than zero, so a typo in ANTHROPIC_MODEL can overspend the estimate but never bypass the cap. What
is free is not a model name's to say: a profile whose calls all run on this machine declares no worst case
(`Profile.worst_case`), and the spend cap books its calls at no cost.

The `openai` profile's server is whatever the operator points it at, so only the operator knows what its
tokens cost: `price_table` prices its model at OPENAI_PRICE_INPUT_PER_MTOK / OPENAI_PRICE_OUTPUT_PER_MTOK,
never at a Claude price its name happens to miss.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from provenance.inference.anthropic_models import claude_judge_model
from provenance.ports import Usage
from provenance.settings import Settings

_PER_TOKEN = 1_000_000


class Price(msgspec.Struct, frozen=True):
    input_per_mtok: float
    output_per_mtok: float


HAIKU_4_5 = Price(input_per_mtok=1.00, output_per_mtok=5.00)
HAIKU_3_5 = Price(input_per_mtok=0.80, output_per_mtok=4.00)
SONNET_4_6 = Price(input_per_mtok=3.00, output_per_mtok=15.00)
DEFAULT_PRICE = HAIKU_4_5

PRICES: dict[str, Price] = {
    "claude-haiku-4-5": HAIKU_4_5,
    "claude-haiku-4-5-20251001": HAIKU_4_5,
    "claude-3-5-haiku-latest": HAIKU_3_5,
    "claude-3-5-haiku-20241022": HAIKU_3_5,
    "claude-sonnet-4-6": SONNET_4_6,
}


def price_table(settings: Settings) -> Mapping[str, Price]:
    """The prices the spend cap charges under these settings: the list prices, under the openai profile its
    model at the price its settings give, and the reading judge's model at its own."""
    table = dict(PRICES)
    if settings.profile == "openai" and settings.openai.model:
        table[settings.openai.model] = Price(
            settings.openai.price_input_per_mtok, settings.openai.price_output_per_mtok
        )
    if settings.judge.name == "openai" and settings.judge.model:
        # The judge's calls at the judge's prices (JUDGE_PRICE_*), never at a Claude price its name misses.
        table[settings.judge.model] = Price(settings.judge.price_input_per_mtok, settings.judge.price_output_per_mtok)
    if settings.judge.name == "anthropic":
        # A Claude judge at JUDGE_PRICE_* when given, else its list price; a model missing from the list at the
        # dearest listed one, since a judge is often the larger model: the cap errs toward spending less.
        model = claude_judge_model(settings)
        dearest = max(PRICES.values(), key=lambda p: p.input_per_mtok + p.output_per_mtok)
        given = Price(settings.judge.price_input_per_mtok, settings.judge.price_output_per_mtok)
        table[model] = given if settings.judge.priced else PRICES.get(model, dearest)
    return table


def price_for(model: str, prices: Mapping[str, Price] = PRICES) -> Price:
    return prices.get(model, DEFAULT_PRICE)


def cost_usd(usage: Usage, prices: Mapping[str, Price] = PRICES) -> float:
    """The cost of one completed call, from the token counts the API reported."""
    price = price_for(usage.model, prices)
    return (usage.input_tokens * price.input_per_mtok + usage.output_tokens * price.output_per_mtok) / _PER_TOKEN


def max_call_cost_usd(model: str, max_input_tokens: int, max_output_tokens: int) -> float:
    """The most one call can cost: what the spend cap reserves before the call is made."""
    return cost_usd(Usage(model=model, input_tokens=max(0, max_input_tokens), output_tokens=max(0, max_output_tokens)))
