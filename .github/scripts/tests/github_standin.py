"""A local stand-in for the few GitHub REST endpoints the workflow scripts call.

    python3 github_standin.py <routes.json> <port-file> <request-log>

routes.json maps a request target (path and query, exactly as sent) to the JSON body to
answer with, or to {"@file": <path>} to answer with that file's bytes (an artifact's zip);
anything else is a 404. Requests without a bearer token get a 401. Each request
target is appended to the log so a test can check what was (or was not) asked.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

routes_path, port_file, log_path = sys.argv[1:4]


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
        if isinstance(route, dict) and "@file" in route:
            with open(route["@file"], "rb") as f:
                body = f.read()
            content_type = "application/zip"
        else:
            body = json.dumps(route).encode()
            content_type = "application/json"
        self.send_response(200)
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
