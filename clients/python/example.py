"""Claims an env of a task, looks at its browser over DevTools, and releases it.

    python3 example.py demo [--url http://127.0.0.1:7878] [--project-dir .]

Driving the browser further (pages, clicks) is a CDP client's work (Playwright's connect_over_cdp, or any
WebSocket client) on the `webSocketDebuggerUrl` printed here, with the same `Authorization: Bearer <agentToken>`.
"""

import argparse
import json

from multienv_client import Client, devtools


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("task")
    parser.add_argument("--url", default="http://127.0.0.1:7878")
    parser.add_argument("--project-dir", default=".")
    args = parser.parse_args()

    client = Client.from_project(args.project_dir, args.url)
    claim = client.claim_waiting(args.task, ttl_seconds=300, patience_seconds=300)
    try:
        for name, computer in claim["computers"].items():
            version = devtools(computer)
            tabs = [t for t in devtools(computer, "/json/list") if t.get("type") == "page"]
            print(json.dumps({
                "computer": name,
                "browser": version.get("Browser"),
                "webSocketDebuggerUrl": version.get("webSocketDebuggerUrl"),
                "tabs": [t.get("url") for t in tabs],
                "startTabs": computer["startTabs"],
            }))
    finally:
        released = client.release(claim["id"])
        print(json.dumps({"released": claim["id"], "episode": released["episode"]}))


if __name__ == "__main__":
    main()
