"""`elicitgate inbox`: the operator's inbox in a terminal, through the admin API.

Lists the pending hosted elicitations (live: it waits on the API's event stream when nothing is
pending), and answers one at prompts: each form field in turn (defaults offered, secrets typed
unseen), a review, then submit; decline and cancel too. The gateway checks the answer; what it refuses
comes back next to the fields and is asked again.

Everything the upstream or the gateway's answers put on screen (server names, messages, titles,
options, errors) is shown literally: as `rich.text.Text`, never parsed as markup (a title `[/]` would
crash it, `[link=…]` would make a hyperlink), with control characters taken out (no escape sequences
from an upstream reach the terminal).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import httpx2
from rich.console import Console
from rich.panel import Panel
from rich.prompt import Confirm, Prompt
from rich.table import Table
from rich.text import Text

from elicitgate.errors import InboxError
from elicitgate.json_shapes import JsonObject, is_array
from elicitgate.logs import strip_controls
from elicitgate.web import forms


def plain(value: Any, style: str = "", *, multiline: bool = False) -> Text:
    """Text from elsewhere, shown as it is (no markup) and without control characters."""
    return Text(strip_controls(str(value), keep_newlines=multiline), style=style)


def line(*parts: str | Text, style: str = "") -> Text:
    """Our own words around their text: `line("  ", plain(label), ": ", plain(message), style="red")`."""
    return Text.assemble(*parts, style=style)


def _age(iso: str) -> str:
    created = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    seconds = max(0, int((dt.datetime.now(dt.UTC) - created).total_seconds()))
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60} s"


class TerminalInbox:
    def __init__(self, url: str, token: str, console: Console | None = None) -> None:
        self.console = console or Console()
        self.http = httpx2.Client(base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.last_errors: list[JsonObject] = []

    # -- API ------------------------------------------------------------------------------------------

    def _get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        if not response.headers.get("content-type", "").startswith("application/json"):
            raise InboxError(
                f"{response.url} answered {response.status_code} {response.reason_phrase}, not the admin API: "
                "is it an elicitgate gateway (serve --http, or demo)?"
            )
        if response.status_code in (401, 404, 429) and path == "/api/elicitations":
            raise InboxError(response.json().get("error", response.text))
        response.raise_for_status()
        return response.json()

    def pending(self) -> list[JsonObject]:
        return [item for item in self._get("/api/elicitations", state="pending")["elicitations"] if item["form_url"]]

    def wait_for_new(self) -> None:
        """Block on the event stream until something is pending."""
        with self.http.stream("GET", "/api/elicitations/events", timeout=httpx2.Timeout(10, read=None)) as stream:
            event = None
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    event = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and event == "pending":
                    if any(item.get("form_url") for item in json.loads(line[5:])):
                        return

    # -- screens --------------------------------------------------------------------------------------

    def show(self, items: list[JsonObject]) -> None:
        table = Table(title="Pending elicitations", title_justify="left")
        for column in ("#", "server", "message", "mode", "waiting", "deadline"):
            table.add_column(column)
        for i, item in enumerate(items, 1):
            table.add_row(
                str(i), plain(item["server"]), plain(item.get("message") or ""), plain(item["mode"]),
                _age(item["created_at"]), plain(item["deadline"].replace("T", " ")),
            )
        self.console.print(table)

    def run(self, *, once: bool = False) -> None:
        while True:
            items = self.pending()
            if not items:
                self.console.print("Waiting for elicitations… (Ctrl-C to quit)")
                self.wait_for_new()
                continue
            self.show(items)
            choices = [str(i) for i in range(1, len(items) + 1)]
            pick = Prompt.ask("Answer which one? (number, r to refresh, q to quit)",
                              choices=[*choices, "r", "q"], default="1", console=self.console, show_choices=False)
            if pick == "q":
                return
            if pick == "r":
                continue
            self.answer(items[int(pick) - 1]["id"])
            if once:
                return

    def answer(self, id_: str) -> None:
        response = self.http.get(f"/api/elicitations/{id_}")
        if response.status_code != 200 or response.json().get("state") not in ("pending", "presented"):
            self.console.print(line("It has already ended (", plain(response.json().get("state")), ")."))
            return
        el = response.json()
        self.console.print(Panel(plain(el.get("message") or "", multiline=True),
                                 title=line(plain(el["server"], "bold"), " asks"), title_align="left"))
        if el["mode"] == "url":
            self.console.print(line("It asks you to open: ", plain(el.get("url") or "", "bold")))
            action = Prompt.ask("When done there", choices=["done", "decline", "cancel"], default="done",
                                console=self.console)
            self._send(id_, {"action": "accept" if action == "done" else action})
            return
        fields = forms.fields_of(el.get("requestedSchema") or {})
        values = forms.initial_values(fields)
        errors: list[JsonObject] = list(el.get("errors") or [])
        while True:
            action = Prompt.ask("Answer, decline or cancel?", choices=["answer", "decline", "cancel"],
                                default="answer", console=self.console)
            if action != "answer":
                self._send(id_, {"action": action})
                return
            values = self.ask_fields(fields, values, errors)
            content, early = forms.parse(fields, values)
            if early:
                errors = early
                continue
            self.review(fields, content)
            if not Confirm.ask("Submit this answer?", default=True, console=self.console):
                errors = []
                continue
            result = self._send(id_, {"action": "accept", "content": content})
            if result != 422:
                return
            errors = self.last_errors

    def ask_fields(
        self, fields: list[forms.Field], values: JsonObject, errors: list[JsonObject]
    ) -> JsonObject:
        by_field: dict[str, list[str]] = {}
        for problem in errors:
            by_field.setdefault(str(problem.get("property")), []).append(str(problem.get("message")))
        out: JsonObject = dict(values)
        for f in fields:
            for message in by_field.get(f.name, []):
                self.console.print(line("  ", plain(f.label), ": ", plain(message), style="red"))
            label = line(plain(f.label), " *" if f.required else "")
            current = values.get(f.name)
            if f.kind == "boolean":
                out[f.name] = "on" if Confirm.ask(label, default=current == "on", console=self.console) else ""
            elif f.kind in ("select", "multi"):
                for i, (value, text) in enumerate(f.options, 1):
                    code = ("(", plain(value), ")") if text != value else ()
                    self.console.print(line(f"    {i}. ", plain(text), *code))
                hint = " (numbers, comma-separated)" if f.kind == "multi" else " (number)"
                shown: list[Any] = current if is_array(current) else ([current] if current else [])
                default = ",".join(str([v for v, _ in f.options].index(v) + 1) for v in shown if v in dict(f.options))
                typed = Prompt.ask(line(label, hint), default=default, console=self.console, show_default=bool(default))
                picked = [self._option(f, part.strip()) for part in typed.split(",") if part.strip()]
                out[f.name] = picked if f.kind == "multi" else (picked[0] if picked else "")
            else:
                kind = {
                    "email": "email", "url": "URL", "date": "YYYY-MM-DD", "datetime": "YYYY-MM-DDTHH:MM UTC"
                }.get(f.kind)
                text = line(label, f" ({kind})") if kind else label
                default = "" if f.sensitive or current is None else str(current)
                out[f.name] = Prompt.ask(text, default=default, password=f.sensitive, console=self.console,
                                         show_default=bool(default))
        return out

    @staticmethod
    def _option(f: forms.Field, typed: str) -> str:
        values = [v for v, _ in f.options]
        if typed.isdigit() and 1 <= int(typed) <= len(values):
            return values[int(typed) - 1]
        for value, text in f.options:
            if typed.lower() in (value.lower(), text.lower()):
                return value
        return typed

    def review(self, fields: list[forms.Field], content: Mapping[str, Any]) -> None:
        table = Table(title="Review", title_justify="left", show_header=False)
        table.add_column("field", style="bold")
        table.add_column("value")
        for f in fields:
            if f.name in content:
                table.add_row(plain(f.label), plain(forms.display(f, content[f.name])))
        self.console.print(table)

    def _send(self, id_: str, raw: JsonObject) -> int:
        response = self.http.post(f"/api/elicitations/{id_}/answer", json=raw)
        body = response.json()
        if response.status_code == 200:
            self.console.print(line("Sent: ", plain(body["state"]), style="green"))
        elif response.status_code == 409:
            self.console.print(line("It has already ended (", plain(body.get("state")), ")."))
        elif response.status_code == 422:
            self.last_errors = body.get("errors") or []
            self.console.print("[red]The gateway did not accept the answer:[/red]")
            for problem in self.last_errors:
                self.console.print(line("  ", plain(problem.get("property") or "form"), ": ",
                                        plain(problem.get("message")), style="red"))
        else:
            self.console.print(line(f"{response.status_code}: ", plain(body.get("error", "")), style="red"))
        return response.status_code
