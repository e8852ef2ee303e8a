"""What POST /corpora and DELETE /corpora/{name} take and give."""

from __future__ import annotations

from typing import Annotated

import msgspec

from provenance.access.clients import Visibility
from provenance.wire import CORPUS_NAME_PATTERN, TEXT_PATTERN, Wire

TITLE_MAX_CHARS = 200

CorpusName = Annotated[str, msgspec.Meta(pattern=CORPUS_NAME_PATTERN, max_length=40)]
Title = Annotated[str, msgspec.Meta(max_length=TITLE_MAX_CHARS, pattern=TEXT_PATTERN)]


class NewCorpus(Wire, forbid_unknown_fields=True):
    name: CorpusName
    visibility: Visibility
    title: Title | None = None


class CreatedCorpus(Wire):
    name: str
    visibility: Visibility
    title: str


class RemovedCorpusOut(Wire):
    name: str
    passages: int
    sentences: int
    cached_answers: int
