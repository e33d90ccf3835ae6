"""The controller's northbound API at the HTTP level: a job body and a raw request."""

import http.client

JOB = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
       "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001},
                   {"id": "w1", "ip": "10.0.0.2", "port": 9001}]}


def raw(api, method, path, body=b"", headers=None):
    conn = http.client.HTTPConnection(api.host, api.port, timeout=5)
    conn.request(method, path, body=body, headers=headers or {})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, data


RESTART_JOB = {"id": "job-r", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
               "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]}
