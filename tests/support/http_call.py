"""One raw HTTP request to a test server (both services' API tests): (status, body)."""

import http.client


def request(target, method, path, body=None, headers=None, timeout=10.0):
    """``target``: anything with ``host`` and ``port`` (a server, an API handle)."""
    conn = http.client.HTTPConnection(target.host, target.port, timeout=timeout)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data
