"""A local stand-in for the few GitHub REST endpoints the workflow scripts call.

    python3 github_standin.py <routes.json> <port-file> <request-log>

routes.json maps a request target (path and query, exactly as sent) to the JSON body to
answer with, or to {"@file": <path>} to answer with that file's bytes (an artifact's zip);
anything else is a 404. A route may instead be {"@sequence": [response, ...]}: the n-th
request to it gets the n-th response (the last one repeats), each either a body as above or
{"@status": 429, "@headers": {...}, "@body": ...} to answer with that status (a test of the
scripts' backoff: 429 then 200). "@now+N" in a header value becomes the Unix time plus N.
Requests without a bearer token get a 401, except under /v1/ (the platform's public job
feed), where a request with one gets the 401: the GitHub token must never go there. Each request
target is appended to the log so a test can check what was (or was not) asked.

Repository variables can be written as on GitHub: PATCH of an existing route
".../actions/variables/<name>" replaces its body with the request's JSON (204; 404 when the
variable does not exist), and POST ".../actions/variables" creates ".../actions/variables/<name>"
(201; 409 when it exists). Writes are logged as "PATCH <target>" / "POST <target>".
"""
import json
import os
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
        # /v1/ is the platform's public job feed (freshness-check.sh reads it without the
        # GitHub token, which must never go there); everything else is GitHub's and needs it.
        platform = self.path.startswith("/v1/")
        if platform == self.headers.get("Authorization", "").startswith("Bearer "):
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

    def write_variable(self, method):
        with open(log_path, "a") as log:
            log.write("%s %s\n" % (method, self.path))
        if not self.headers.get("Authorization", "").startswith("Bearer "):
            self.send_response(401)
            self.end_headers()
            return
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        with open(routes_path) as f:
            routes = json.load(f)
        if method == "POST" and self.path.endswith("/actions/variables"):
            target = self.path + "/" + str(body.get("name", ""))
            status = 409 if target in routes else 201
        elif method == "PATCH" and "/actions/variables/" in self.path:
            target = self.path
            status = 204 if target in routes else 404
        else:
            target, status = None, 404
        if status in (201, 204):
            routes[target] = {"name": body.get("name"), "value": body.get("value")}
            with open(routes_path + ".tmp", "w") as f:
                json.dump(routes, f)
            os.replace(routes_path + ".tmp", routes_path)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PATCH(self):
        self.write_variable("PATCH")

    def do_POST(self):
        self.write_variable("POST")

    def log_message(self, *args):
        pass


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file, "w") as f:
    f.write(str(server.server_address[1]))
server.serve_forever()
