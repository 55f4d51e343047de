"""Everything that joins the eras: a 2026-07-28 client's calls parked across their retries (`rounds`),
the sealed `requestState` it holds (`sealing`; its envelope, `state_seal`), input requests answered for an
upstream of either era (`input_requests`), the per-request envelope each era expects (`envelope`), and
handshake-era resource subscriptions carried to 2026-07-28 upstreams (`subscriptions`)."""
