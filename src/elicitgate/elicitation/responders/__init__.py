"""Responders: who shows an elicitation to a human and brings the raw answer back. All of them live here.

The broker owns the life (checks, attempts, deadline, end); a responder only presents one request and
returns the `ElicitResult` the human gave, unchecked (`elicitation.model.Responder`). Each is one way to reach a human:

- `client.PushToClient`: `elicitation/create` pushed to the handshake-era client whose call caused it;
- `client.InputRequired`: an `input_required` round of a 2026-07-28 client's parked call (`bridging.rounds`),
  answered by its retry;
- `hosted.HostedPage`: a URL-mode link, sent to a client with URL mode, to the gateway's own page;
- `hosted.InInbox`: the question waits for the operator (`/inbox`, the terminal's `elicitgate inbox`, the
  admin API), or for whoever a notice's link reaches (`elicitation.notify`);
- `beside.FirstAnswer`: the client's own responder raced against the question's page (`notify.when:
  always`); `beside.PageOnly`: the page alone, once the client was let go (`unattended: wait`).

The broker chooses among them (`Broker._responder`): the hosting policy first (`Hosting.responder_for`),
else the client itself (`to_client`), raced with its page where notices say so; `PageOnly` at the deadline.
"""

from elicitgate.elicitation.responders.base import PageHost
from elicitgate.elicitation.responders.beside import FirstAnswer, PageOnly
from elicitgate.elicitation.responders.client import (
    INPUT_REQUIRED,
    PUSH_TO_CLIENT,
    InputRequired,
    PushToClient,
    to_client,
)
from elicitgate.elicitation.responders.hosted import HostedPage, InInbox

__all__ = [
    "INPUT_REQUIRED",
    "PUSH_TO_CLIENT",
    "FirstAnswer",
    "HostedPage",
    "InInbox",
    "InputRequired",
    "PageHost",
    "PageOnly",
    "PushToClient",
    "to_client",
]
