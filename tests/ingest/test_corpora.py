"""Named corpora side by side, and what each says about itself: ingest, the pipeline, /corpora and /ask,
against a real Postgres."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from provenance.cli import main
from provenance.errors import CorpusConflict, UnknownCorpus
from provenance.inference.embedder import Embedder
from provenance.ingest.describe import describe
from provenance.ingest.folder import ingest
from provenance.pipeline.door import Pipeline
from provenance.profiles.local import build_local_profile
from provenance.services import Services, build_services
from provenance.settings import Settings
from provenance.store import Store
from provenance.wire import CorpusExample
from tests.conftest import CORPUS, LiveServer
from tests.reliability.support import corpus_copy, drop_schema

GARDEN_README = """# Wrenfield Community Garden guide

How the allotments, tools and compost work at the community garden on Mill Lane.

## More

Anything under a second heading is not the description.
"""
GARDEN_DOCS = {
    "plots.md": "# Plots\n\n## Plot Rent\n\nA half plot costs $40 per year. A full plot costs $70 per year.\n",
    "tools.md": "# Tools\n\n## Tool Shed\n\nThe tool shed opens at 7 am and the shed code changes every March.\n",
}
GARDEN_EXAMPLES = "# one question a line\nHow much is a half plot per year?\n\nWhen does the tool shed open?\n"


def write_garden(root: Path, *, readme: bool = True, examples: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in GARDEN_DOCS.items():
        (root / name).write_text(text)
    if readme:
        (root / "README.md").write_text(GARDEN_README)
    if examples:
        (root / "examples.txt").write_text(GARDEN_EXAMPLES)
    return root


def test_a_corpus_describes_itself_from_its_readme_and_examples_file(tmp_path: Path) -> None:
    garden = write_garden(tmp_path / "garden")
    meta = describe(garden, list(GARDEN_DOCS.items()))
    assert meta.title == "Wrenfield Community Garden guide"
    assert meta.description == "How the allotments, tools and compost work at the community garden on Mill Lane."
    assert meta.examples == [
        CorpusExample(question="How much is a half plot per year?"),
        CorpusExample(question="When does the tool shed open?"),
    ]
    handbook = describe(CORPUS, [])
    assert handbook.title == "Foundry Commons Makerspace handbook"
    assert [e.question for e in handbook.examples][:2] == [
        "How much does a standard locker cost per month?",
        "What are the opening hours on Saturday?",
    ]
    assert handbook.examples[2] == CorpusExample(question="Is there car parking for members?", covered=False)


def test_without_readme_or_examples_the_headings_say_it_and_the_folder_names_nothing(tmp_path: Path) -> None:
    bare = write_garden(tmp_path / "bare-garden", readme=False, examples=False)
    meta = describe(bare, list(GARDEN_DOCS.items()))
    # Two documents and no README: no title (readers show the corpus's name), never the folder's name.
    assert meta.title == ""
    assert meta.description == "Covers Plots, Tools."
    assert [e.question for e in meta.examples] == [
        "What do the documents say about Plot Rent?",
        "What do the documents say about Tool Shed?",
    ]


async def test_corpora_live_side_by_side_and_replacing_one_is_explicit(
    fresh_store: Store, embedder: Embedder, tmp_path: Path
) -> None:
    handbook = await ingest(fresh_store, CORPUS, lambda: embedder, embedder.model_name)
    garden_dir = write_garden(tmp_path / "garden")
    garden = await ingest(fresh_store, garden_dir, lambda: embedder, embedder.model_name, corpus="garden")
    assert garden.deleted == 0 and "into corpus garden" in garden.summary()
    # The examples are questions, never passages; README.md is a document too unless it opens with the
    # ignore marker (as corpus/README.md does).
    assert sorted(await fresh_store.stored_hashes("garden")) == [
        "README.md#intro",
        "README.md#more",
        "plots.md#plot-rent",
        "tools.md#tool-shed",
    ]
    assert len(await fresh_store.stored_hashes()) == handbook.passages  # the default corpus is untouched
    states = {c.name: c for c in await fresh_store.corpora()}
    assert sorted(states) == ["default", "garden"]
    assert states["garden"].title == "Wrenfield Community Garden guide"
    assert states["default"].title == "Foundry Commons Makerspace handbook"
    assert states["garden"].source_dir == str(garden_dir.resolve())

    # Another folder into the default corpus: refused, and nothing changes.
    with pytest.raises(CorpusConflict, match="--replace"):
        await ingest(fresh_store, garden_dir, lambda: embedder, embedder.model_name)
    assert len(await fresh_store.stored_hashes()) == handbook.passages

    # Re-ingesting the same folder after a file left it says which file's passages went.
    (garden_dir / "tools.md").unlink()
    synced = await ingest(fresh_store, garden_dir, lambda: embedder, embedder.model_name, corpus="garden")
    assert synced.removed == {"tools.md": 1} and "1 removed (tools.md: 1)" in synced.summary()

    # --replace: the command says whose documents it replaced and what it removed.
    replaced = await ingest(fresh_store, CORPUS, lambda: embedder, embedder.model_name, corpus="garden", replace=True)
    assert replaced.replaced_from == str(garden_dir.resolve())
    assert replaced.removed == {"README.md": 2, "plots.md": 1}
    assert f"its documents came from {garden_dir.resolve()}" in replaced.summary()
    assert replaced.embedded == 0 or replaced.embedded == replaced.passages  # per-corpus hashes

    with pytest.raises(Exception, match="corpus name"):
        await ingest(fresh_store, garden_dir, lambda: embedder, embedder.model_name, corpus="Not A Name")


async def test_the_pipeline_answers_from_the_corpus_asked_for(
    fresh_store: Store, embedder: Embedder, tmp_path: Path
) -> None:
    await ingest(fresh_store, CORPUS, lambda: embedder, embedder.model_name)
    await ingest(fresh_store, write_garden(tmp_path / "garden"), lambda: embedder, embedder.model_name, corpus="garden")
    pipeline = Pipeline(Settings(), fresh_store, embedder, build_local_profile(embedder))
    await pipeline.corpora.refresh()
    question = "How much is a half plot per year?"

    garden = (await pipeline.ask(question, request_id="g", use_cache=False, corpus="garden")).response
    assert garden.corpus == "garden" and garden.corpus_version == pipeline.corpora.known["garden"].version
    assert {p.source for p in garden.stages.retrieval.passages} <= {"README.md", "plots.md", "tools.md"}
    assert garden.stages.retrieval.passages

    handbook = (await pipeline.ask(question, request_id="d", use_cache=False)).response
    assert handbook.corpus == "default" and handbook.corpus_version == pipeline.corpora.version
    assert not {p.source for p in handbook.stages.retrieval.passages} & {"README.md", "plots.md", "tools.md"}

    # The same question is a different cache entry in each corpus.
    assert pipeline.answer_cache_key(question, "garden") != pipeline.answer_cache_key(question, "default")
    with pytest.raises(UnknownCorpus, match="'default', 'garden'"):
        await pipeline.ask(question, request_id="x", corpus="nope")


# --- over HTTP ------------------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def two_corpora(
    pg_dsn: str, data_dir: Path, embedder: Embedder, tmp_path: Path, corpus_services: Services
) -> AsyncIterator[Settings]:
    """The session's corpus as "default" (copied, then re-ingested from corpus/ for its description) and
    a small second corpus, "garden"."""
    settings = await corpus_copy(pg_dsn, data_dir, embedder, CORPUS, rate_limit_per_hour=0, cache_ttl_s=0)
    services = await build_services(settings, with_guards=False)
    try:
        await ingest(
            services.store, write_garden(tmp_path / "garden"), lambda: embedder, embedder.model_name, corpus="garden"
        )
    finally:
        await services.close()
    yield settings
    await drop_schema(pg_dsn, settings.database.schema)


@pytest.fixture
def two_corpora_server(two_corpora: Settings) -> Iterator[LiveServer]:
    with LiveServer(two_corpora) as server:
        yield server


def test_corpora_and_ask_over_http(two_corpora_server: LiveServer) -> None:
    url = two_corpora_server.url
    listed = httpx.get(f"{url}/corpora").json()
    assert listed["default"] == "default"
    by_name = {c["name"]: c for c in listed["corpora"]}
    assert by_name["garden"]["title"] == "Wrenfield Community Garden guide"
    assert by_name["garden"]["examples"][0] == {"question": "How much is a half plot per year?", "covered": True}
    assert by_name["default"]["examples"][2]["covered"] is False and by_name["garden"]["passageCount"] == 4

    one = httpx.get(f"{url}/corpus", params={"name": "garden"}).json()
    assert one["name"] == "garden" and [f["source"] for f in one["files"]] == ["README.md", "plots.md", "tools.md"]
    assert httpx.get(f"{url}/corpus").json()["name"] == "default"
    missing = httpx.get(f"{url}/corpus", params={"name": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_corpus"

    asked = httpx.post(
        f"{url}/ask", json={"question": "When does the tool shed open?", "corpus": "garden"}, timeout=120
    )
    assert asked.status_code == 200 and asked.json()["corpus"] == "garden"
    unknown = httpx.post(f"{url}/ask", json={"question": "When does the tool shed open?", "corpus": "nope"})
    assert unknown.status_code == 404
    assert unknown.json()["error"] == {
        "code": "unknown_corpus",
        "message": "there is no corpus named 'nope'; the corpora are: 'default', 'garden'",
    }
    malformed = httpx.post(f"{url}/ask", json={"question": "When does the tool shed open?", "corpus": "../x"})
    assert malformed.status_code == 400 and "corpus" in malformed.json()["error"]["message"]

    # The same passage id may exist in two corpora: /passages takes the corpus.
    garden_passage = httpx.get(f"{url}/passages/plots.md%23plot-rent", params={"corpus": "garden"})
    assert garden_passage.status_code == 200 and "$40" in garden_passage.json()["text"]
    assert httpx.get(f"{url}/passages/plots.md%23plot-rent").status_code == 404


def test_openapi_declares_the_corpus_field_and_endpoint(live_server: LiveServer) -> None:
    schema = httpx.get(f"{live_server.url}/schema/openapi.json").json()
    corpus = schema["components"]["schemas"]["AskRequest"]["properties"]["corpus"]
    declared = [corpus, *corpus.get("oneOf", [])]
    assert any(d.get("pattern") == r"^[a-z0-9][a-z0-9_-]{0,39}$" and d.get("maxLength") == 40 for d in declared)
    assert "/corpora" in schema["paths"] and "404" in schema["paths"]["/ask"]["post"]["responses"]
    listed = schema["components"]["schemas"]["CorpusSummary"]["properties"]
    assert {"name", "title", "description", "examples", "passageCount"} <= set(listed)


def test_ingest_cli_keeps_corpora_apart_and_warm_cache_follows_them(
    pg_dsn: str,
    data_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import asyncio
    import uuid

    schema = f"t_{uuid.uuid4().hex[:10]}"
    for var, value in {"DATABASE_URL": pg_dsn, "DB_SCHEMA": schema, "DATA_DIR": str(data_dir)}.items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    garden = write_garden(tmp_path / "garden")
    small = tmp_path / "small"
    small.mkdir()
    shutil.copy(CORPUS / "05-storage-and-lockers.md", small)
    try:
        assert main(["ingest", str(small)]) == 0
        assert capsys.readouterr().out.startswith("ingested 1 files into corpus default: ")
        assert main(["ingest", str(garden)]) == 2
        err = capsys.readouterr().err
        assert "would replace them" in err and "--corpus NAME" in err and "--replace" in err
        assert main(["ingest", str(garden), "--corpus", "garden"]) == 0
        capsys.readouterr()
        assert main(["warm-cache", "--corpus", "garden"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert [line.split(": ", 1)[1] for line in lines] == [
            "How much is a half plot per year?",
            "When does the tool shed open?",
        ]
        assert all(") garden: " in line for line in lines), lines
    finally:
        asyncio.run(drop_schema(pg_dsn, schema))
