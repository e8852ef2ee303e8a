"""The `local` profile with trained models (`LOCAL_MODELS=trained`): a reader answers and a separate
trained verifier checks. Both are int8 ONNX files in `api/provenance/data/`, built by `make train` (docs/models.md).

Not the default: on this project's measurements the models trained so far refuse most of the handbook's
questions (see docs/models.md), so the feature verifier (`provenance.feature_verifier`) stays the
default until a trained pair beats it on every suite.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from provenance import text as T
from provenance.cross_encoders import Calibration, Reader, get_reader, load_calibration
from provenance.passages import ScoredPassage
from provenance.ports import Decomposer, Generation, Profile, Screener, Usage
from provenance.profiles.local import left_out_note
from provenance.verifier import build_trained_verifier

LOCAL_READER = "local-reader"


class ReaderGenerator:
    """Answers with the sentence holding the reader's best span, or returns an empty answer when the reader
    finds no span that beats its no-answer score by the calibrated margin.

    A question that asks two things is read as two: each part the passages answer gets its sentence, and
    each they don't is named in a closing note (a claim about the documents, which decomposition drops), so
    a partial answer says what it leaves out."""

    name = LOCAL_READER

    def __init__(self, reader: Reader, calibration: Calibration) -> None:
        self.reader = reader
        self.calibration = calibration
        self.min_margin = calibration.reader_min_margin

    async def _sentence(self, question: str, passages: Sequence[ScoredPassage]) -> tuple[str, str] | None:
        """(sentence, passage id) of the best answer, or None when the reader finds none."""
        spans = await self.reader.read_async(question, [p.text for p in passages])
        if not spans or spans[0].margin < self.min_margin:
            return None
        best = spans[0]
        passage = passages[best.passage_index]
        return T.sentences_around(passage.text, best.start, best.end) or best.text, passage.id

    async def generate(self, question: str, passages: Sequence[ScoredPassage]) -> Generation:
        usage = Usage(model=self.reader.name)
        # A part that only sets the scene ("I lost my keyfob, how much is a replacement?") is read as part
        # of the question, not on its own: it asks nothing the documents could leave out.
        asking = [part for part in T.sub_questions(question) if T.asks(part)]
        parts = asking if len(asking) > 1 else [question]
        hits = await asyncio.gather(*(self._sentence(part, passages) for part in parts))
        found: dict[str, str] = {}
        missing: list[str] = []
        for part, hit in zip(parts, hits, strict=True):
            if hit is None:
                missing.append(part)
            else:
                found.setdefault(*hit)
        if not found:
            return Generation(answer="", used_passage_ids=[], usage=usage)
        answer = " ".join(found) + left_out_note(missing)
        return Generation(answer=answer, used_passage_ids=list(dict.fromkeys(found.values())), usage=usage)


def build_trained_local_profile(screener: Screener, decomposer: Decomposer) -> Profile:
    return Profile(
        name="local",
        screener=screener,
        generator=ReaderGenerator(get_reader(), load_calibration()),
        verifier=build_trained_verifier(),
        # The reader and the verifier run on this machine: nothing is paid for.
        worst_case=None,
        screener_reads_passages=True,
        cache_tag="trained",
        decomposer=decomposer,
    )
