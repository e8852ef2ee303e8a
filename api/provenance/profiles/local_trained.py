"""The `local` profile's generator under `LOCAL_GENERATOR=trained`: a trained reader answers (the separate
trained verifier, `claims.trained`, checks). Both are int8 ONNX files in `api/provenance/data/`, built by
`make train` (docs/models.md).

Not the default: on this project's measurements the models trained so far refuse most of the handbook's
questions (see docs/models.md), so the feature verifier stays the default until a trained pair beats it on
every suite.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from provenance import text as T
from provenance.inference.cross_encoders import Calibration, Reader, get_reader, load_calibration
from provenance.pipeline.reasons import left_out_note
from provenance.ports import Generation, ScoredPassage, Usage

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
        return T.sentences_around(passage.text, best.start, best.end, passage.sentences) or best.text, passage.id

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


def build_reader_generator() -> ReaderGenerator:
    return ReaderGenerator(get_reader(), load_calibration())
