"""The test site served on loopback, in a thread of the test process: the rendered handbook, a sitemap, a
robots.txt, and the traps a crawler meets on real sites. It records every request it receives (host,
path, arrival time, whether it was conditional), so tests measure politeness where it is felt: at the
server.

Its robots.txt shuts every robot out (`User-agent: *` / `Disallow: /`) and lets Provenance in except
`/traps/private/`: a crawl that reads the wrong group fetches nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from dataclasses import dataclass, field
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO
from pathlib import Path
from tempfile import TemporaryDirectory
from urllib.parse import parse_qs, urlsplit

from tests.ingest.documents_support import markdown_to_docx

ROBOTS = """User-agent: *
Disallow: /

User-agent: Provenance
Allow: /
Disallow: /traps/private/
{crawl_delay}
Sitemap: {origin}/sitemap.xml
"""

TRAPS = {
    "/traps/loop-a/": "a redirect loop",
    "/traps/away/": "a redirect to another origin",
    "/traps/calendar/?day=1": "an endless calendar",
    "/traps/big/": "an oversized page",
    "/traps/drip/": "a slow drip",
    "/traps/data.zip": "a non-HTML content type",
    "/traps/error/": "a page that errors",
    "/traps/gone/": "a page that is gone",
    "/traps/private/": "a page robots.txt disallows",
    "/traps/guide.pdf": "a PDF",
    "/traps/guide.docx": "a Word file",
    "/traps/fine/": "an ordinary page",
}
BIG_BYTES = 3_000_000
DRIP_SECONDS = 20.0
LAST_MODIFIED = formatdate(1_700_000_000, usegmt=True)
GUIDE_MARKDOWN = "# Field guide\n\nThe field guide says badges are renewed every two years.\n"


def minimal_pdf(text: str) -> bytes:
    """A one-page PDF with a text layer, written by hand so the test needs no PDF library."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % n + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for off in offsets:
        out.write(b"%010d 00000 n \n" % off)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def _docx() -> bytes:
    with TemporaryDirectory() as tmp:
        return markdown_to_docx(GUIDE_MARKDOWN, Path(tmp) / "guide.docx").read_bytes()


@dataclass(frozen=True)
class Hit:
    host: str
    path: str  # with its query
    at: float  # time.monotonic()
    conditional: bool
    status: int


@dataclass
class SiteServer:
    pages: dict[str, str]  # URL path -> HTML; tests change it between crawls
    sitemap_paths: list[str] | None = None  # None: every page
    crawl_delay: float | None = None
    robots: str | None = None  # None: ROBOTS
    errors: set[str] = field(default_factory=set)  # page paths that answer 500 (a server error mid-sync)
    hits: list[Hit] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0  # the most requests the server was answering at once
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        self._binary = {"/traps/guide.pdf": minimal_pdf("The field guide says badges are renewed every two years.")}
        self._binary["/traps/guide.docx"] = _docx()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self.origin

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def arrived(self, delta: int) -> None:
        with self._lock:
            self.in_flight += delta
            self.most_in_flight = max(self.most_in_flight, self.in_flight)

    def record(self, hit: Hit) -> None:
        with self._lock:
            self.hits.append(hit)

    def most_in_one_second(self, host: str | None = None) -> int:
        """The most requests that arrived from the crawler within any one second (a sliding window)."""
        times = sorted(h.at for h in self.hits if host is None or h.host == host)
        most, start = 0, 0
        for end, t in enumerate(times):
            while t - times[start] >= 1.0:
                start += 1
            most = max(most, end - start + 1)
        return most

    def robots_txt(self) -> str:
        delay = f"Crawl-delay: {self.crawl_delay}" if self.crawl_delay is not None else ""
        template = self.robots if self.robots is not None else ROBOTS
        return template.format(crawl_delay=delay, origin=self.origin)

    def sitemap_xml(self) -> str:
        from tests.sources.site_build import sitemap

        return sitemap(self.sitemap_paths if self.sitemap_paths is not None else list(self.pages), self.origin)


def _handler(site: SiteServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Persistent connections, as every web server a documentation site sits behind keeps them: the
        # default HTTP/1.0 closed each one after its response, so a re-sync's 304s paid a connection each.
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet: the tests read `hits`
            pass

        def send(self, status: int, body: bytes = b"", ctype: str = "text/html; charset=utf-8", **headers: str) -> None:
            site.record(
                Hit(
                    self.headers.get("Host", ""),
                    self.path,
                    time.monotonic(),
                    bool(self.headers.get("If-None-Match") or self.headers.get("If-Modified-Since")),
                    status,
                )
            )
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            for name, value in headers.items():
                self.send_header(name.replace("_", "-"), value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body:
                self.wfile.write(body)

        def do_GET(self) -> None:
            split = urlsplit(self.path)
            path, query = split.path, parse_qs(split.query)
            # The crawler gave up on a trap (the drip, the big page): what it should do.
            site.arrived(+1)
            try:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.route(path, query)
            finally:
                site.arrived(-1)

        def route(self, path: str, query: dict[str, list[str]]) -> None:
            if path == "/robots.txt":
                self.page(site.robots_txt().encode(), "text/plain")
            elif path == "/sitemap.xml":
                self.page(site.sitemap_xml().encode(), "application/xml")
            elif path in site.errors:
                self.send(500, b"<html><body>Internal error</body></html>")
            elif path in site.pages:
                self.page(site.pages[path].encode())
            elif path == "/traps/":
                links = "".join(f'<li><a href="{p}">{what}</a></li>' for p, what in TRAPS.items())
                self.send(200, f"<html><body><h1>Traps</h1><ul>{links}</ul></body></html>".encode())
            elif path == "/traps/loop-a/":
                self.send(302, Location="/traps/loop-b/")
            elif path == "/traps/loop-b/":
                self.send(302, Location="/traps/loop-a/")
            elif path == "/traps/away/":
                self.send(302, Location=f"http://localhost:{site.port}/handbook/about/")
            elif path == "/traps/calendar/":
                day = int(query.get("day", ["1"])[0])
                body = (
                    f"<html><body><h1>Events on day {day}</h1><p>No events are planned on day {day}.</p>"
                    f'<a href="/traps/calendar/?day={day + 1}">Next day</a>'
                    f'<a href="/traps/calendar/?day={day - 1}">Previous day</a></body></html>'
                )
                self.send(200, body.encode())
            elif path == "/traps/big/":
                self.send(200, b"<html><body><p>" + b"word " * (BIG_BYTES // 5) + b"</p></body></html>")
            elif path == "/traps/drip/":
                self.drip()
            elif path == "/traps/data.zip":
                self.send(200, b"PK\x03\x04" + b"\x00" * 64, "application/zip")
            elif path == "/traps/error/":
                self.send(500, b"<html><body>Internal error</body></html>")
            elif path == "/traps/gone/":
                self.send(410, b"<html><body>Gone</body></html>")
            elif path in ("/traps/private/", "/traps/fine/"):
                self.send(200, b"<html><body><h1>Fine</h1><p>An ordinary page about badges.</p></body></html>")
            elif path == "/traps/guide.pdf":
                self.send(200, site._binary[path], "application/pdf")
            elif path == "/traps/guide.docx":
                ctype = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
                self.send(200, site._binary[path], ctype)
            else:
                self.send(404, b"<html><body>Not found</body></html>")

        def page(self, body: bytes, ctype: str = "text/html; charset=utf-8") -> None:
            """A page, robots.txt or the sitemap: with an ETag of its body, 304 to a request that names it."""
            etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
            if self.headers.get("If-None-Match") == etag:
                self.send(304, ctype=ctype, ETag=etag, Last_Modified=LAST_MODIFIED)
            else:
                self.send(200, body, ctype, ETag=etag, Last_Modified=LAST_MODIFIED)

        def drip(self) -> None:
            """Headers at once, then a byte at a time, for longer than any page should take."""
            site.record(Hit(self.headers.get("Host", ""), self.path, time.monotonic(), False, 200))
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Connection", "close")  # no length: the body ends when the connection does
            self.end_headers()
            self.wfile.write(b"<html><body><p>")
            deadline = time.monotonic() + DRIP_SECONDS
            while time.monotonic() < deadline:
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.2)

    return Handler
