"""A client that shows no forms calls an eliciting tool through elicitgate; the operator answers it.

    ELICITGATE_ADMIN_TOKEN=h_S5Wl9J3N1dnuhsRY59GShwdWvbMizqN27djbMR6pM python docs/examples/hosted_client.py

The gateway runs over stdio (as a desktop client starts it) with `http.hosted_listen`, so the hosted
pages, the inbox and the admin API are at http://127.0.0.1:8810. The operator's part is done here with
the admin API (what `curl` or `elicitgate inbox` do); a person would open the inbox link instead.
"""

import json
import os
import sys
from pathlib import Path

import anyio
import httpx2

from mcp import Client
from mcp.client.stdio import StdioServerParameters

CONFIG = Path(__file__).with_name("hosted.json")
WEB = "http://127.0.0.1:8810"
TOKEN = os.environ.setdefault("ELICITGATE_ADMIN_TOKEN", "h_S5Wl9J3N1dnuhsRY59GShwdWvbMizqN27djbMR6pM")


async def operator() -> None:
    async with httpx2.AsyncClient(base_url=WEB, headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        # The admin API's event stream says when something is pending (the inbox page uses it too).
        async with http.stream("GET", "/api/elicitations/events", timeout=httpx2.Timeout(10, read=60)) as events:
            async for line in events.aiter_lines():
                if line.startswith("data:") and (pending := json.loads(line[5:])):
                    break
        item = pending[0]
        print("pending:", f"[{item['server']}]", item["message"])
        print("page:", item["form_url"].split("/e/")[0] + "/e/…")
        answer_url = f"/api/elicitations/{item['id']}/answer"
        answer = {"name": "Ada", "email": "ada.example.com", "date": "2026-12-24", "guests": 4}
        refused = await http.post(answer_url, json={"action": "accept", "content": answer})
        print("refused:", refused.status_code, [e["property"] for e in refused.json()["errors"]])
        answer["email"] = "ada@example.com"
        accepted = await http.post(answer_url, json={"action": "accept", "content": answer})
        print("answered:", accepted.json()["state"])


async def main() -> None:
    gateway = StdioServerParameters(
        command=sys.executable, args=["-m", "elicitgate.cli", "serve", "-c", str(CONFIG)], env=dict(os.environ)
    )
    async with Client(gateway, mode="legacy") as client:  # no elicitation callback: this client shows no forms
        async with anyio.create_task_group() as tg:
            tg.start_soon(operator)
            result = await client.call_tool("demo__book_table", {"restaurant": "Chez Ada"})
        print("demo__book_table:", result.content[0].text)


anyio.run(main)
