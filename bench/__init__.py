"""elicitgate's benchmark: the gateway against direct calls and the FastMCP proxy.

Run it with `bench/run` (builds bench/.venv, then `python -m bench`); see bench/README.md.
Everything is measured over real processes and real transports on 127.0.0.1.
"""
