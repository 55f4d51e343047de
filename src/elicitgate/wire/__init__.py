"""How messages travel, for faces and upstreams alike: framing, codecs, and the stdio and HTTP wires."""
