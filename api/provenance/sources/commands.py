"""`provenance sources add|list|remove|sync`: sites as sources of a corpus (issue 46). `sync` runs in the
foreground through the queue's own code: it queues the corpus's sync job and runs exactly that job here, as a
serving worker would, then prints one line per source. `remove` does the same with a job that rebuilds the corpus
without the site, so that its passages are gone when the command returns, not at the next sync."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg

from provenance.access.commands import CommandMistake, check_corpus_name
from provenance.access.store import AccessStore
from provenance.inference.embedder import Embedder
from provenance.jobs.queue import Job, JobKind, JobStore
from provenance.jobs.worker import Worker
from provenance.settings import Settings
from provenance.sources.options import BadSiteOption, site_options, site_url
from provenance.store.corpora import CorpusStore
from provenance.store.sources import SourceStore


def add_source_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add = sub.add_parser("add", help="add a site to a corpus (made public if it doesn't exist)")
    add.add_argument("corpus")
    add.add_argument("url", help="the site's start URL (http or https)")
    add.add_argument("--sitemap", default=None, metavar="URL", help="default: robots.txt's, else /sitemap.xml")
    add.add_argument("--prefix", default=None, metavar="PATH", help="only pages under it (default: the URL's folder)")
    add.add_argument("--max-pages", type=int, default=None, metavar="N", help="default: SOURCES_MAX_PAGES (2000)")
    add.add_argument("--every", default=None, metavar="24h", help="sync it on this schedule (s, m, h or d)")
    add.add_argument("--insecure", action="store_true", help="accept an invalid TLS certificate")
    listing = sub.add_parser("list", help="the sources of one corpus, or of all")
    listing.add_argument("corpus", nargs="?", default=None)
    remove = sub.add_parser("remove", help="remove a site and its pages from a corpus (served no more when it ends)")
    remove.add_argument("corpus")
    remove.add_argument("url")
    sync = sub.add_parser("sync", help="sync every site of a corpus now, in the foreground")
    sync.add_argument("corpus")


async def add_site(pool: asyncpg.Pool, corpus: str, url: str, options: dict[str, Any]) -> tuple[str, bool]:
    """(the source's id, whether the corpus was made for it)."""
    made = False
    state = await CorpusStore(pool).corpus_state(corpus)
    if state is None:
        made = await AccessStore(pool).create_corpus(corpus, "public", "", exists=False)
    elif not await SourceStore(pool).documents(corpus):
        # A sync rebuilds the corpus from its documents: a folder's passages (`provenance ingest`) are none.
        raise CommandMistake(f"corpus {corpus!r} holds the documents of a folder (`provenance ingest`); add the site"
                             " to a corpus of its own")  # fmt: skip
    source = await SourceStore(pool).add_source(corpus, "site", url, options)
    return source.id, made


async def sources(
    pool: asyncpg.Pool, settings: Settings, args: argparse.Namespace, embedder: Callable[[], Embedder]
) -> int:
    store = SourceStore(pool)
    action: str = args.sources_command
    if action == "add":
        check_corpus_name(args.corpus)
        try:
            url = site_url(args.url)
            options = site_options(args.sitemap, args.prefix, args.max_pages, args.every, args.insecure)
        except BadSiteOption as exc:
            raise CommandMistake(str(exc)) from None
        source_id, made = await add_site(pool, args.corpus, url, options)
        print(
            f"{'created public corpus ' + args.corpus + '; ' if made else ''}added {url} to {args.corpus}"
            f" (source {source_id[:12]}); `provenance sources sync {args.corpus}` reads it"
        )
        return 0
    if action == "list":
        corpora = [args.corpus] if args.corpus else [c.name for c in await CorpusStore(pool).corpora()]
        for corpus in corpora:
            for source in await store.sources(corpus):
                synced = source.synced_at.isoformat(timespec="seconds") if source.synced_at else "never"
                where = source.location or "(uploads)"
                print(f"{corpus}\t{source.kind}\t{where}\t{source.options or ''}\tsynced {synced}")
        return 0
    if action == "remove":
        check_corpus_name(args.corpus)
        try:
            url = site_url(args.url)
        except BadSiteOption as exc:
            raise CommandMistake(str(exc)) from None
        found = next((s for s in await store.sources(args.corpus) if s.kind == "site" and s.location == url), None)
        if found is None:
            raise CommandMistake(f"corpus {args.corpus!r} has no site {url!r}")
        return await remove_now(pool, settings, args.corpus, found.id, embedder)
    check_corpus_name(args.corpus)
    if not any(s.kind == "site" for s in await store.sources(args.corpus)):
        raise CommandMistake(f"corpus {args.corpus!r} has no site; `provenance sources add` adds one")
    return await sync_now(pool, settings, args.corpus, embedder)


async def run_now(
    pool: asyncpg.Pool, settings: Settings, corpus: str, kind: JobKind, payload: dict[str, Any],
    embedder: Callable[[], Embedder],
) -> Job:  # fmt: skip
    """A job queued and run here, in the foreground, through the queue's own code; its end state."""
    jobs = JobStore(pool)
    job = await jobs.enqueue(corpus, kind, {**payload, "foreground": True})
    worker = Worker(settings, pool, embedder, name=f"sources-{kind}")
    # Another job of the corpus may be running: it goes first, as in the queue.
    while True:
        if await worker.run_once(only=job.id):
            break
        await asyncio.sleep(1.0)
    done = await jobs.get(job.id)
    if done is None or done.state != "done":
        raise CommandMistake(f"the {kind} job {job.id} failed: {done.error if done else 'its job is gone'}")
    return done


async def sync_now(pool: asyncpg.Pool, settings: Settings, corpus: str, embedder: Callable[[], Embedder]) -> int:
    done = await run_now(pool, settings, corpus, "sync", {}, embedder)
    for outcome in done.documents:
        if outcome.get("status") == "synced":
            print(outcome["summary"])
    for outcome in done.documents:
        if outcome.get("status") == "failed":
            print(f"  failed {outcome['fileName']}: {outcome.get('reason', '')} {outcome.get('detail', '')}".rstrip())
    return 0


async def remove_now(
    pool: asyncpg.Pool, settings: Settings, corpus: str, source_id: str, embedder: Callable[[], Embedder]
) -> int:
    """The site and its pages out of the corpus when this returns: its passages are no longer served."""
    done = await run_now(pool, settings, corpus, "remove", {"source": source_id}, embedder)
    for outcome in done.documents:
        if outcome.get("status") == "removed":
            print(f"removed {outcome['fileName']} from {corpus}: {outcome['documents']} pages, no longer served")
        else:
            raise CommandMistake(f"the site was not removed: {outcome.get('reason', outcome)}")
    return 0
