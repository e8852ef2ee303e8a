"""Headers and secrets: security headers and a CSP on the page and the API, CORS only for configured
origins, and no key, secret or token in any log line of a real `provenance serve` process."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from litestar.testing import AsyncTestClient

from provenance.app import create_app
from provenance.http.middleware import CONTENT_SECURITY_POLICY
from provenance.services import Services
from provenance.settings import Settings
from tests.conftest import LiveServer
from tests.fake_anthropic import FakeAnthropic
from tests.guards.test_turnstile import SECRET as TURNSTILE_SECRET
from tests.guards.test_turnstile import FakeSiteverify
from tests.reliability.support import corpus_copy, drop_schema

QUESTION = "How much does a standard locker cost per month?"
EXPECTED = {
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "strict-origin-when-cross-origin",
}


def _assert_security_headers(r: httpx.Response) -> None:
    for name, value in EXPECTED.items():
        assert r.headers.get(name) == value, (r.url, name, r.headers)
    assert "camera=()" in r.headers["permissions-policy"]
    csp = r.headers["content-security-policy"]
    assert csp == CONTENT_SECURITY_POLICY
    for directive in [
        "default-src 'self'",
        "script-src 'self' https://challenges.cloudflare.com",
        "frame-src https://challenges.cloudflare.com",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]:
        assert directive in csp


def test_the_page_and_the_api_send_security_headers(live_server: LiveServer) -> None:
    with httpx.Client(base_url=live_server.url) as client:
        page = client.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        responses = [
            page,
            client.get("/app.js") if (Path(__file__).parents[2] / "web" / "app.js").exists() else page,
            client.get("/healthz"),
            client.get("/config"),
            client.post("/ask", json={"question": QUESTION}),
            client.post("/ask", json={"question": 1}),  # a 400 from validation
            client.get("/no/such/route"),  # the router's own 404
            client.delete("/ask"),  # the router's own 405
            client.get("/schema/openapi.json"),
        ]
    for r in responses:
        _assert_security_headers(r)


def test_the_page_loads_nothing_its_csp_would_block() -> None:
    """No inline script or style, and no third-party source but Turnstile's, in the page itself."""
    html = (Path(__file__).parents[2] / "web" / "index.html").read_text()
    assert "<script>" not in html and " style=" not in html and "<style" not in html
    assert "javascript:" not in html and "onclick=" not in html.lower()
    for src in [part.split('"')[1] for part in html.split(" src=")[1:]]:
        assert src.startswith(("/", "https://challenges.cloudflare.com/")) or "://" not in src, src


async def test_cors_allows_only_configured_origins(corpus_services: Services) -> None:
    allowed = "https://docs.example.org"
    settings = corpus_services.settings.with_overrides(cors_origins=(allowed,))
    app = create_app(settings, services=corpus_services)
    async with AsyncTestClient(app) as client:
        ok = await client.get("/healthz", headers={"origin": allowed})
        assert ok.headers.get("access-control-allow-origin") == allowed
        other = await client.get("/healthz", headers={"origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers
        preflight = await client.options(
            "/ask",
            headers={
                "origin": "https://evil.example",
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type",
            },
        )
        assert preflight.headers.get("access-control-allow-origin") != "https://evil.example"
        allowed_preflight = await client.options(
            "/ask",
            headers={"origin": allowed, "access-control-request-method": "POST"},
        )
        assert allowed_preflight.headers.get("access-control-allow-origin") == allowed
    # Without CORS_ORIGINS, no origin gets the header at all.
    async with AsyncTestClient(create_app(corpus_services.settings, services=corpus_services)) as client:
        r = await client.get("/healthz", headers={"origin": allowed})
        assert "access-control-allow-origin" not in r.headers


@pytest_asyncio.fixture(loop_scope="session")
async def corpus_schema(pg_dsn: str, data_dir: Path, corpus_services: Services) -> AsyncIterator[Settings]:
    settings = await corpus_copy(pg_dsn, data_dir)
    yield settings
    await drop_schema(pg_dsn, settings.database.schema)


def test_no_secret_reaches_the_logs(pg_dsn: str, data_dir: Path, corpus_schema: Settings, tmp_path: Path) -> None:
    """A real `provenance serve` at debug level, driven through every path that handles a secret: an API
    key made with `provenance keys create`, a wrong key, Turnstile tokens checked against a fake
    siteverify with the secret key, and the anthropic profile calling a fake Messages API with its key."""
    anthropic_key = f"sk-ant-api03-{secrets.token_urlsafe(24)}"
    good_token = f"good-{secrets.token_urlsafe(24)}"
    bad_token = f"forged-{secrets.token_urlsafe(24)}"
    wrong_key = f"pv_{secrets.token_urlsafe(32)}"
    siteverify = FakeSiteverify()
    fake = FakeAnthropic(api_key=anthropic_key).start()
    env = {
        **os.environ,
        "DATABASE_URL": pg_dsn,
        "DB_SCHEMA": corpus_schema.database.schema,
        "DATA_DIR": str(data_dir),
        "PROFILE": "anthropic",
        "ANTHROPIC_API_KEY": anthropic_key,
        "ANTHROPIC_BASE_URL": fake.base_url,
        "ANTHROPIC_MAX_RETRIES": "0",
        "TURNSTILE_SECRET_KEY": TURNSTILE_SECRET,
        "TURNSTILE_SITE_KEY": "1x00000000000000000000AA",
        "TURNSTILE_VERIFY_URL": siteverify.url,
        "LOG_LEVEL": "debug",
        "CACHE_TTL_S": "0",
        "PYTHONUNBUFFERED": "1",
    }
    logs = tmp_path / "serve.log"
    try:
        made = subprocess.run(
            [sys.executable, "-m", "provenance", "keys", "create", "log-test"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert made.returncode == 0, made.stderr
        api_key = made.stdout.strip()
        assert api_key.startswith("pv_")
        with logs.open("w") as sink:
            server = subprocess.Popen(
                # Port 0: the server binds a free port and prints it (a port picked free here could be taken first).
                [sys.executable, "-m", "provenance", "serve", "--port", "0"],
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
            try:
                statuses = _drive(_served_at(logs, server), server, api_key, wrong_key, good_token, bad_token)
            finally:
                server.send_signal(signal.SIGINT)
                try:
                    server.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait()
        assert statuses == {"key": 200, "wrong_key": 401, "good_token": 200, "bad_token": 200, "no_token": 200}
        # The flows really carried the secrets where they belong.
        assert fake.requests and all(r.api_key == anthropic_key for r in fake.requests)
        assert {f.get("response") for f in siteverify.forms} >= {good_token, bad_token}
        assert all(f.get("secret") == TURNSTILE_SECRET for f in siteverify.forms)
    finally:
        fake.close()
        siteverify.close()
    output = logs.read_text() + made.stdout.replace(api_key, "") + made.stderr
    assert '"event": "request"' in output and "/ask" in output  # the log is really there
    leaked = {
        name: secret
        for name, secret in {
            "anthropic api key": anthropic_key,
            "turnstile secret": TURNSTILE_SECRET,
            "api key": api_key,
            "wrong api key": wrong_key,
            "turnstile token": good_token,
            "rejected turnstile token": bad_token,
        }.items()
        # Any long-enough piece would do to recognise a secret, so look for a distinctive slice too.
        if secret in output or secret[-16:] in output
    }
    assert not leaked, f"secrets in the logs: {sorted(leaked)}"
    print(f"\nsecrets: {len(output.splitlines())} log lines checked, none of 6 secrets found")


_SERVING = re.compile(r"^serving on (http://127\.0\.0\.1:\d+) \(profile \w+\); Ctrl-C stops$", re.MULTILINE)


def _served_at(log: Path, server: subprocess.Popen[bytes], within_s: float = 90) -> str:
    """The address `provenance serve --port 0` printed once it had bound its socket."""
    deadline = time.monotonic() + within_s
    while (found := _SERVING.search(log.read_text(errors="replace"))) is None:
        assert server.poll() is None, "provenance serve exited:\n" + log.read_text(errors="replace")
        assert time.monotonic() < deadline, "provenance serve printed no address"
        time.sleep(0.1)
    return found.group(1)


def _drive(
    url: str, server: subprocess.Popen[bytes], api_key: str, wrong_key: str, good: str, bad: str
) -> dict[str, int]:
    deadline = time.monotonic() + 90
    with httpx.Client(base_url=url, timeout=30) as client:
        while True:
            assert server.poll() is None, "provenance serve exited"
            assert time.monotonic() < deadline, "provenance serve did not start"
            try:
                if client.get("/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        ask = {"question": QUESTION}
        out = {
            "key": client.post("/ask", json=ask, headers={"authorization": f"Bearer {api_key}"}),
            "wrong_key": client.post("/ask", json=ask, headers={"authorization": f"Bearer {wrong_key}"}),
            "good_token": client.post("/ask", json={**ask, "turnstileToken": good}),
            "bad_token": client.post("/ask", json={**ask, "turnstileToken": bad}),
            "no_token": client.post("/ask", json=ask),
        }
    # The whole pipeline ran, the model included (whether the fake's reply was grounded doesn't matter).
    assert out["key"].json()["stages"]["generation"]["status"] == "ok", out["key"].text
    assert out["good_token"].json()["stages"]["botCheck"]["status"] == "ok"
    assert out["bad_token"].json()["reason"] == "bot_check_failed"
    return {name: r.status_code for name, r in out.items()}


@pytest.fixture(autouse=True)
def _no_leftover_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # The subprocess gets its settings explicitly; nothing from the developer's shell may override them.
    for var in ("ANTHROPIC_API_KEY", "TURNSTILE_SECRET_KEY", "CORS_ORIGINS"):
        monkeypatch.delenv(var, raising=False)
