"""A local stand-in for the few GitHub REST endpoints the workflow scripts call.

    python3 github_standin.py <routes.json> <port-file> <request-log>

routes.json maps a request target (path and query, exactly as sent) to the JSON body to
answer with, or to {"@file": <path>} to answer with that file's bytes (an artifact's zip);
anything else is a 404. A route may instead be {"@sequence": [response, ...]}: the n-th
request to it gets the n-th response (the last one repeats), each either a body as above or
{"@status": 429, "@headers": {...}, "@body": ...} to answer with that status (a test of the
scripts' backoff: 429 then 200). "@now+N" in a header value becomes the Unix time plus N.
Requests without a bearer token get a 401. Each request
target is appended to the log so a test can check what was (or was not) asked.
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

routes_path, port_file, log_path = sys.argv[1:4]
hits = {}


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log_path, "a") as log:
            log.write(self.path + "\n")
        with open(routes_path) as f:
            routes = json.load(f)
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            self.send_response(401)
            self.end_headers()
            return
        if self.path not in routes:
            self.send_response(404)
            self.end_headers()
            return
        route = routes[self.path]
        status, headers = 200, {}
        if isinstance(route, dict) and "@sequence" in route:
            # Counted per route and routes-file content, so a test rewriting the routes starts over.
            key = (self.path, json.dumps(route, sort_keys=True))
            n = hits.get(key, 0)
            hits[key] = n + 1
            route = route["@sequence"][min(n, len(route["@sequence"]) - 1)]
        if isinstance(route, dict) and "@status" in route:
            status = route["@status"]
            for name, value in route.get("@headers", {}).items():
                if isinstance(value, str) and value.startswith("@now+"):
                    value = str(int(time.time()) + int(value[5:]))
                headers[name] = value
            route = route.get("@body", {"message": "stand-in status %d" % status})
        if isinstance(route, dict) and "@file" in route:
            with open(route["@file"], "rb") as f:
                body = f.read()
            content_type = "application/zip"
        else:
            body = json.dumps(route).encode()
            content_type = "application/json"
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
