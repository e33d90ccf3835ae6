"""Both services serve their API pages (/docs, /redoc) with every script, style and icon
from themselves: an offline cluster has no CDN to load them from."""

from __future__ import annotations

import http.client
from html.parser import HTMLParser

import pytest

from controller.api import ApiServer
from job_scheduler.service.api import SchedulerHTTPServer
from support.controller_fakes import make_service
from controller.fake_fabric import bring_up
from support.scheduler_service import make_service as make_scheduler


class _Assets(HTMLParser):
    """Every URL a page loads: <script src>, <link href>, <img src>, and the strings of its
    inline scripts that look like URLs of an asset or of the OpenAPI document."""

    def __init__(self):
        super().__init__()
        self.urls: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("src", "href"):
            if attrs.get(key) and tag in ("script", "link", "img"):
                self.urls.append(attrs[key])
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            import re
            self.urls += re.findall(r"""['"]((?:https?:)?//[^'"]+|/[A-Za-z0-9_./-]+\.(?:js|css|json|png))['"]""",
                                    data)


def _get(host, port, path) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("GET", path)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, resp.getheader("Content-Type", ""), data


@pytest.fixture(params=["scheduler", "controller"])
def service(request, tmp_path):
    if request.param == "scheduler":
        server = SchedulerHTTPServer(("127.0.0.1", 0), make_scheduler(tmp_path),
                                     token="sched-token-1234567").start()
    else:
        server = ApiServer(bring_up(make_service("two-rack")), "127.0.0.1", 0).start()
    yield server
    server.stop()


@pytest.mark.parametrize("page, needs", [("/docs", ("swagger-ui-bundle.js", "swagger-ui.css")),
                                         ("/redoc", ("redoc.standalone.js",))])
def test_api_pages_load_every_asset_from_the_service(service, page, needs):
    status, ctype, data = _get(service.host, service.port, page)
    assert status == 200 and ctype.startswith("text/html")
    parser = _Assets()
    parser.feed(data.decode())
    urls = parser.urls
    assert all(any(u.endswith(n) for u in urls) for n in needs), urls
    remote = [u for u in urls if u.startswith(("http:", "https:", "//"))]
    assert remote == [], f"{page} loads from another host: {remote}"
    assert "fonts.googleapis" not in data.decode()
    for url in urls:
        status, ctype, body = _get(service.host, service.port, url)
        assert status == 200, (url, status)
        assert len(body) > 100, url
        if url.endswith(".js"):
            assert "javascript" in ctype, (url, ctype)
        elif url.endswith(".css"):
            assert ctype.startswith("text/css"), (url, ctype)
        elif url.endswith(".json"):
            assert b'"openapi"' in body


def test_the_swagger_ui_shown_reads_openapi_3_1(service):
    """FastAPI's documents are OpenAPI 3.1.x: Swagger UI 4 shows none of them ("Unable to
    render this definition"); the bundle served must be a Swagger UI 5."""
    import json
    import re

    _, _, doc = _get(service.host, service.port, "/openapi.json")
    assert json.loads(doc)["openapi"].startswith("3.1")
    _, _, page = _get(service.host, service.port, "/docs")
    js = re.search(r'src="([^"]+swagger-ui-bundle\.js)"', page.decode()).group(1)
    _, _, bundle = _get(service.host, service.port, js)
    assert re.search(rb'"5\.\d+\.\d+"', bundle), "not a Swagger UI 5 bundle"
