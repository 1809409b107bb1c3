"""A client of `multienv serve`, the Python standard library alone (urllib, json).

    from multienv_client import Client
    client = Client.from_project(".")                      # reads .multienv/serve.token
    claim = client.claim("demo", ttl_seconds=600, wait_seconds=60)
    agent = claim["computers"]["agent"]                     # cdpUrl, agentToken, startTabs
    client.release(claim["id"])

A claim's `id` renews and releases it; `agentToken` opens that computer's `cdpUrl` alone (as
`Authorization: Bearer <agentToken>`). The service's own token is never an agent's: keep it in the harness.
"""

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:7878"
TOKEN_FILE = os.path.join(".multienv", "serve.token")


class ServeError(Exception):
    """An answer other than the one asked for: its status, its one-line message and its body."""

    def __init__(self, status, message, body=None, retry_after=None):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message
        self.body = body or {}
        self.retry_after = retry_after


class Client:
    def __init__(self, url=DEFAULT_URL, token=None, timeout=700):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    @classmethod
    def from_project(cls, project_dir=".", url=DEFAULT_URL):
        """A client with the token `multienv serve` wrote in the project directory."""
        with open(os.path.join(project_dir, TOKEN_FILE), encoding="utf-8") as f:
            return cls(url, f.read().strip())

    def _call(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                text = answer.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")
            try:
                payload = json.loads(text)
            except ValueError:
                payload = {"error": text}
            retry = error.headers.get("Retry-After")
            raise ServeError(error.code, payload.get("error", text), payload, retry and float(retry)) from None
        return json.loads(text) if text else None

    def claim(self, task, ttl_seconds=600, wait_seconds=0):
        """A ready env of the task: id, episode, stack, expiresAt, computers.<name>.{cdpUrl, agentToken, startTabs}."""
        return self._call("POST", "/v1/claims", {"task": task, "ttlSeconds": ttl_seconds, "waitSeconds": wait_seconds})

    def claim_waiting(self, task, ttl_seconds=600, patience_seconds=600):
        """As claim, asking again after each 503's Retry-After until `patience_seconds` have passed."""
        deadline = time.monotonic() + patience_seconds
        while True:
            left = max(0, deadline - time.monotonic())
            try:
                return self.claim(task, ttl_seconds, min(left, 60))
            except ServeError as error:
                if error.status != 503 or time.monotonic() >= deadline:
                    raise
                time.sleep(error.retry_after or 1)

    def renew(self, claim_id, ttl_seconds=600):
        return self._call("POST", f"/v1/claims/{urllib.parse.quote(claim_id, safe='')}/renew", {"ttlSeconds": ttl_seconds})

    def release(self, claim_id, collect=True):
        query = "" if collect else "?collect=false"
        return self._call("DELETE", f"/v1/claims/{urllib.parse.quote(claim_id, safe='')}{query}")

    def pools(self):
        return self._call("GET", "/v1/pools")["pools"]


def devtools(computer, path="/json/version"):
    """GET a DevTools HTTP endpoint of a claimed computer (`/json/version`, `/json/list`), with its agent token."""
    request = urllib.request.Request(computer["cdpUrl"].rstrip("/") + path)
    request.add_header("Authorization", f"Bearer {computer['agentToken']}")
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read().decode("utf-8"))
