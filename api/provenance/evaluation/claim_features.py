"""Each claim's relevance features, as the feature verifier read them, for an eval record: what a rule over
relevance is tried on offline (`--json`), without asking the suite again. Nothing here changes an answer:
the features are read again from the question, the claim and the passages the claim rests on, by the same
extractor the verifier used."""

from __future__ import annotations

from typing import Any

import msgspec

from provenance.claims.features import FeatureVerifier
from provenance.claims.verdict import JudgedVerifier
from provenance.ports import ScoredPassage, Verifier
from provenance.wire import AskResponse


def feature_verifier(verifier: Verifier) -> FeatureVerifier | None:
    """The feature verifier that judged relevance (under a reading judge too), else None."""
    if isinstance(verifier, JudgedVerifier):
        verifier = verifier.local
    return verifier if isinstance(verifier, FeatureVerifier) else None


def claim_records(verifier: FeatureVerifier, question: str, response: AskResponse) -> list[dict[str, Any]]:
    """For every claim the gate saw: its text, whether it is quoted word for word, its relevance before the
    lexical caps and the cap that applied, and the features of the passage it rests on that read best (the
    verifier takes the best), with that passage's heading."""
    passages = {
        p.id: ScoredPassage(id=p.id, source=p.source, heading=p.heading, text=p.text, score=p.score)
        for p in response.stages.retrieval.passages
    }
    claims = response.stages.gate.claims
    if not claims:
        return []
    extractor = verifier.relevance
    q_vec = extractor.sentences.embedder.embed_query(question)
    vectors = extractor.sentences.get([c.text for c in claims])
    records = []
    for claim, c_vec in zip(claims, vectors, strict=True):
        read = [
            (verifier.coef.relevance.probability(f), f, p)
            for p in (passages[pid] for pid in claim.supporting_passage_ids if pid in passages)
            for f in [extractor.features(question, claim.text, c_vec, q_vec, p)]
        ]
        best = max(read, key=lambda r: r[0], default=None)
        records.append(
            {
                "text": claim.text,
                "quoted": claim.quoted,
                "support": claim.support,
                "relevance": claim.relevance,
                "localRelevance": claim.local_relevance,
                "relevanceCappedBy": claim.relevance_capped_by,
                "passageId": None if best is None else best[2].id,
                "heading": None if best is None else best[2].heading,
                "passageText": None if best is None else best[2].text,
                "features": None if best is None else msgspec.structs.asdict(best[1]),
                "modelRelevance": None if best is None else round(best[0], 4),
            }
        )
    return records
