"""The controller's northbound API at the HTTP level: a job body and a raw request."""

from support.http_call import request

JOB = {"id": "job-a", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
       "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001},
                   {"id": "w1", "ip": "10.0.0.2", "port": 9001}]}


def raw(api, method, path, body=b"", headers=None):
    return request(api, method, path, body, headers, timeout=5)


RESTART_JOB = {"id": "job-r", "servers": [{"id": "s0", "ip": "10.0.0.3", "port": 9000}],
               "workers": [{"id": "w0", "ip": "10.0.0.1", "port": 9001}]}
