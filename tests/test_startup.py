"""Start-up (issue 16): each face imports what it needs and not the other face's parts; a client that
leaves at once lets the gateway exit. Real `elicitgate serve` processes; what they imported is read
from the process itself when it exits."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx2

from tests.conftest import PY, Process, free_port, wait_healthy, write_config

DUMP_MODULES = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
from elicitgate.cli import app
app(prog_name="elicitgate")
"""
"""`elicitgate ...` that writes the names of every module it imported to a file as it exits."""

SDK_PARTS_NEVER_NEEDED = {"mcp.server.mcpserver", "mcp.client.client", "mcp.client.session_group"}
"""What `mcp/__init__.py` and `mcp/server/__init__.py` would import: the gateway uses none of it."""
HTTP_FACE_PARTS = {"elicitgate.faces.http", "elicitgate.faces.auth", "elicitgate.web.app", "elicitgate.web.admin"}
STDIO_FACE_PARTS = {"elicitgate.faces.stdio", "elicitgate.faces.stdio_pipes", "mcp.server.stdio"}
AUDIT_STORE = {"elicitgate.audit.store", "sqlalchemy", "alembic", "aiosqlite"}
HTTP_CLIENT = {"httpx2", "elicitgate.wire.http", "mcp.client.sse", "mcp.client.streamable_http"}
SPEC_SCHEMAS = {"mcp_types._v2025_11_25", "mcp_types._v2026_07_28"}
ONLY_WHEN_USED = {"yaml", "jsonschema", "jwt", "cryptography", "ada_url", "prometheus_client.exposition", *HTTP_CLIENT,
                  *SPEC_SCHEMAS, "pythonjsonlogger"}
"""A YAML config's parser; the answer checks, imported with the first answer; JWT checks (`http.auth` with an
issuer); the requestState seal (`cryptography`), at a 2026-07-28 client's first round; the HTTP client, with
the first streamable HTTP or SSE upstream; the URL parser (`ada_url`, ~2 MiB), at the first URL-mode link or
hosted page's host; prometheus_client's exposition (its package `__init__`), at the first `/metrics` scrape;
the spec's schemas per protocol version (`mcp_types.methods` runs at
the first request checked: `sdk_packages.SEEDED`); python-json-logger, with `log_format: json`."""
NOT_AT_REST = {"mcp.server.auth.routes", "mcp.server.auth.handlers.authorize", "mcp.server.streamable_http",
               "mcp.server.streamable_http_manager", "sse_starlette", "uvicorn.main", "multiprocessing", "json5"}
"""Issue 34, idle memory: the SDK's OAuth authorization server, its streamable HTTP transport and sse_starlette
(`mcp.server.lowlevel.server` imports them for `Server.streamable_http_app` only: `sdk_packages.STOOD_IN`),
uvicorn's command line (`uvicorn.main`: `sdk_packages.PACKAGE_NAMES`), json5 (a config that is plain JSON)."""
ADMIN_TOKEN = "startup-QZXCCzFG2H1yjGiibISJUcddN9nXV4OpQb6zie2ctLI"


def _serve_stdio_modules(config: Path, out: Path) -> set[str]:
    """`serve` on stdio with a client that closes stdin at once: up to ready, then out."""
    done = subprocess.run(
        [PY, "-c", DUMP_MODULES, str(out), "serve", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "ready on stdio" in done.stderr
    return set(json.loads(out.read_text()))


def test_the_stdio_face_imports_no_http_face_and_no_unused_sdk_part(tmp_path):
    config = write_config(tmp_path, {}, audit={"enabled": False})
    modules = _serve_stdio_modules(config, tmp_path / "modules.json")
    assert "elicitgate.gateway" in modules and "elicitgate.faces.stdio" in modules  # it did serve
    assert modules & (HTTP_FACE_PARTS | SDK_PARTS_NEVER_NEEDED | AUDIT_STORE | ONLY_WHEN_USED | NOT_AT_REST) == set()


def test_the_http_face_imports_no_stdio_face_and_no_terminal_inbox(tmp_path):
    config = write_config(tmp_path, {}, audit={"enabled": False})
    out = tmp_path / "modules.json"
    port = free_port()
    gateway = Process([PY, "-c", DUMP_MODULES, str(out), "serve", "--config", str(config), "--http",
                       f"127.0.0.1:{port}"], port)
    try:
        wait_healthy(gateway.url)
    finally:
        gateway.proc.send_signal(signal.SIGINT)  # after SIGTERM uvicorn re-raises it: no atexit
        try:
            gateway.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            gateway.proc.kill()
            gateway.proc.communicate()
    modules = set(json.loads(out.read_text()))
    assert "elicitgate.faces.http" in modules  # it did serve
    assert modules & (STDIO_FACE_PARTS | SDK_PARTS_NEVER_NEEDED | AUDIT_STORE | ONLY_WHEN_USED
                       | NOT_AT_REST | {"elicitgate.web.terminal"}) == set()


def test_a_client_that_leaves_at_once_lets_the_gateway_exit_while_its_new_audit_store_opens(tmp_path):
    # The retention cleanup's first purge ran as the gateway stopped; cancelled inside its transaction,
    # SQLAlchemy's aiosqlite connection never closed and the process never exited.
    for attempt in range(3):
        store = tmp_path / f"audit-{attempt}.db"
        config = write_config(tmp_path, {}, audit={"url": f"sqlite:///{store}", "open_at_start": True})
        modules = _serve_stdio_modules(config, tmp_path / "modules.json")
        assert "elicitgate.audit.store" in modules
        assert store.exists()


def test_by_default_the_audit_store_opens_when_first_needed_not_at_start(tmp_path):
    store = tmp_path / "audit.db"
    config = write_config(tmp_path, {}, audit={"url": f"sqlite:///{store}"})
    modules = _serve_stdio_modules(config, tmp_path / "modules.json")
    assert modules & AUDIT_STORE == set()
    assert not store.exists()


def test_a_read_of_the_admin_api_opens_the_audit_store(tmp_path):
    store = tmp_path / "audit.db"
    config = write_config(tmp_path, {}, audit={"url": f"sqlite:///{store}"})
    port = free_port()
    gateway = Process([PY, "-m", "elicitgate.cli", "serve", "--config", str(config), "--http", f"127.0.0.1:{port}"],
                      port, env={"ELICITGATE_ADMIN_TOKEN": ADMIN_TOKEN})
    try:
        wait_healthy(gateway.url)
        assert not store.exists()
        read = httpx2.get(f"{gateway.url}/api/audit", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=30)
        assert read.status_code == 200 and read.json() == {"records": []}
        assert store.exists()
    finally:
        gateway.stop()


def test_sdk_names_stay_reachable_through_the_deferred_packages():
    code = (
        "import sys, elicitgate, mcp.server.connection\n"
        "assert 'mcp.server.mcpserver' not in sys.modules\n"
        "import mcp\n"
        "from mcp.server import MCPServer\n"
        "from mcp.client import ClientSession\n"
        "assert mcp.Client.__name__ == 'Client' and mcp.types.Tool.__name__ == 'Tool'\n"
        "assert MCPServer.__module__ == 'mcp.server.mcpserver.server' and ClientSession.__name__ == 'ClientSession'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_audit_store_opens_after_the_upstreams_first_attempt(tmp_path):
    """With `audit.open_at_start`: opening the store (SQLAlchemy's import, the migration check) takes CPU the
    start-up needs: it waits
    until every upstream had its first attempt, so "ready" comes first. The upstream here takes 2 s to
    start, longer than the store takes to open."""
    slow = {"command": "sh", "args": ["-c", f"sleep 2; exec {PY} -m elicitgate.demo.server"]}
    config = write_config(tmp_path, {"slow": slow},
                          audit={"url": f"sqlite:///{tmp_path / 'audit.db'}", "open_at_start": True})
    proc = subprocess.Popen([PY, "-m", "elicitgate.cli", "serve", "--config", str(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        for line in proc.stderr:  # ends when the process does
            lines.append(line)
            if "audit trail at" in line:
                break
    finally:
        proc.stdin.close()  # the client leaves: the gateway exits
        proc.stderr.read()
        proc.wait(timeout=60)
    ready = next(i for i, line in enumerate(lines) if "ready on stdio" in line)
    opened = next(i for i, line in enumerate(lines) if "audit trail at" in line)
    assert "slow up" in lines[ready] and ready < opened


def test_the_names_seeded_for_the_deferred_spec_schemas_are_the_sdks():
    """`sdk_packages.SEEDED` stands for `mcp_types.methods` until another of its names is read: its values must be
    the module's own, and reading any other name runs the module (its schemas) then. In a process of its own:
    the suite has the module loaded already."""
    code = (
        "import sys, typing, elicitgate, mcp.server.lowlevel.server\n"
        "from elicitgate.sdk_packages import SEEDED\n"
        "from elicitgate.faces.server import MODERN_ROUTED, ROUTED\n"
        "assert 'mcp_types._v2025_11_25' not in sys.modules\n"
        "import mcp_types.methods as methods\n"
        "seeded = SEEDED['mcp_types.methods']\n"
        "assert methods.CLIENT_REQUESTS and 'mcp_types._v2025_11_25' in sys.modules\n"
        "assert seeded['CACHEABLE_METHODS'] == methods.CACHEABLE_METHODS\n"
        "assert seeded['INPUT_REQUIRED_METHODS'] == methods.INPUT_REQUIRED_METHODS\n"
        "assert typing.get_args(seeded['CacheableMethod']) == typing.get_args(methods.CacheableMethod)\n"
        "defined = {m for m, v in methods.CLIENT_REQUESTS if v == '2026-07-28'}\n"
        "assert set(MODERN_ROUTED) == defined & set(ROUTED), (MODERN_ROUTED, defined)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


SPEC_MAPS = """
import json, sys
from types import MappingProxyType
if sys.argv[1] == "deferred":
    import elicitgate
import mcp_types.methods as methods
assert methods.CLIENT_REQUESTS is not None  # runs the module (deferred: `sdk_packages.SEEDED`)
later = "mcp_types._v2026_07_28"
assert (later in sys.modules) == (sys.argv[1] == "plain"), sys.argv
maps = {name: value for name, value in vars(methods).items() if isinstance(value, MappingProxyType)}
rows = {name: sorted((repr(key), repr(value)) for key, value in value.items()) for name, value in maps.items()}
assert later in sys.modules  # every row read
defaults = [(f.__name__, key, [n for n, m in maps.items() if m is value])
            for f in vars(methods).values() if callable(f) and getattr(f, "__kwdefaults__", None)
            for key, value in f.__kwdefaults__.items() if isinstance(value, MappingProxyType)]
assert all(found for _, _, found in defaults), defaults
print(json.dumps({"rows": rows, "defaults": defaults}, sort_keys=True))
"""
"""The maps of `mcp_types.methods` (each row's class by name) and which of them the functions' defaults are, read with
`elicitgate` imported (`deferred`) or without (`plain`: the SDK as it is)."""


def test_the_spec_maps_read_their_2026_rows_when_read_and_are_the_sdks():
    """`sdk_packages.ROWS_BUILT_WHEN_READ`: `mcp_types.methods` runs without `mcp_types._v2026_07_28`, which its
    maps import when a 2026-07-28 row is first read; a handshake-era check reads none. Every map then has the SDK's
    own rows, and the functions' defaults (`surface=...`) are the module's maps."""
    code = (
        "import sys, elicitgate\n"
        "from mcp_types import methods\n"
        "init = {'protocolVersion': '2025-11-25', 'capabilities': {}, 'clientInfo': {'name': 'c', 'version': '1'}}\n"
        "methods.validate_client_request('initialize', '2025-11-25', init)\n"
        "methods.serialize_server_result('initialize', '2025-11-25', {'protocolVersion': '2025-11-25',\n"
        "    'capabilities': {}, 'serverInfo': {'name': 's', 'version': '1'}})\n"
        "assert ('tools/list', '2026-07-28') in methods.CLIENT_REQUESTS and len(methods.SERVER_RESULTS)\n"
        "assert 'mcp_types._v2026_07_28' not in sys.modules\n"
        "import pydantic\n"
        "try:\n"
        "    methods.validate_client_request('tools/list', '2026-07-28', {})\n"
        "except pydantic.ValidationError:\n"
        "    pass  # no `_meta` envelope: what matters is that the row was read\n"
        "import mcp_types._v2026_07_28 as v2026\n"
        "assert methods.CLIENT_REQUESTS[('tools/list', '2026-07-28')] is v2026.ListToolsRequest\n"
        "results = methods.SERVER_RESULTS\n"
        "rows = dict(results.items())\n"
        "assert results.copy() == rows == (results | {}) == ({} | results) and results == rows\n"
        "assert repr(results).startswith('mappingproxy({')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    deferred, plain = (
        subprocess.run([sys.executable, "-c", SPEC_MAPS, how], capture_output=True, text=True, timeout=120)
        for how in ("deferred", "plain")
    )
    assert deferred.returncode == 0, deferred.stderr
    assert plain.returncode == 0, plain.stderr
    assert json.loads(deferred.stdout) == json.loads(plain.stdout)
    assert json.loads(plain.stdout)["defaults"]  # the check saw the functions' maps


def test_the_sdk_servers_http_app_works_through_its_stand_ins():
    """`sdk_packages.STOOD_IN`: `mcp.server.lowlevel.server` imported without the modules of its HTTP transport;
    `Server.streamable_http_app` imports them when called and builds the SDK's own app and session manager, the
    seeded defaults are the SDK's, and whoever imports one of those modules gets the real one."""
    code = (
        "import sys, inspect, elicitgate\n"
        "from mcp.server.lowlevel.server import Server\n"
        "from elicitgate.sdk_packages import STAND_IN_VALUES, STOOD_IN\n"
        "stood_in = STOOD_IN['mcp.server.lowlevel.server']\n"
        "assert not set(stood_in) & set(sys.modules), set(stood_in) & set(sys.modules)\n"
        "from uvicorn import Config\n"
        "import uvicorn, uvicorn.config, uvicorn.server\n"
        "assert 'uvicorn.main' not in sys.modules\n"
        "assert uvicorn.Config is Config is uvicorn.config.Config and uvicorn.Server is uvicorn.server.Server\n"
        "assert callable(uvicorn.main) and uvicorn.run.__name__ == 'run'  # the command, not the module\n"
        "cli = sys.modules['uvicorn.main']\n"
        "assert uvicorn.main is cli.main and uvicorn.Server is cli.Server\n"
        "assert uvicorn.__version__\n"
        "server = Server('x')\n"
        "app = server.streamable_http_app(host='127.0.0.1')\n"
        "import mcp.server.streamable_http_manager as manager, mcp.server.streamable_http, mcp.server.auth.routes\n"
        "assert type(server.session_manager) is manager.StreamableHTTPSessionManager\n"
        "assert type(app).__name__ == 'Starlette'\n"
        # With a token verifier: the authentication middleware and the protected route, through their stand-ins.
        "from mcp.server.auth.settings import AuthSettings\n"
        "from mcp.server.auth.provider import TokenVerifier\n"
        "from starlette.middleware.authentication import AuthenticationMiddleware\n"
        "from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware\n"
        "class Verifier:\n"
        "    async def verify_token(self, token): return None\n"
        "auth = AuthSettings(issuer_url='https://auth.example', resource_server_url='http://127.0.0.1:1/mcp')\n"
        "app = Server('y').streamable_http_app(host='127.0.0.1', auth=auth, token_verifier=Verifier())\n"
        "stack, layers = app.build_middleware_stack(), []\n"
        "while stack is not None:\n"
        "    layers.append(type(stack)); stack = getattr(stack, 'app', None)\n"
        "assert AuthenticationMiddleware in layers, layers\n"
        "endpoints = [type(getattr(route, 'endpoint', None)) for route in app.routes]\n"
        "assert RequireAuthMiddleware in endpoints, endpoints\n"
        "import importlib\n"
        "for name, names in stood_in.items():\n"
        "    module = importlib.import_module(name)\n"
        "    assert all(inspect.getmodule(getattr(module, n)) is module for n in names), name\n"
        "    for key, value in STAND_IN_VALUES.get(name, {}).items():\n"
        "        assert getattr(module, key) == value, (name, key)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


MODULES_AT_PRESPAWN = """
import json, sys
out = sys.argv.pop(1)
from elicitgate.upstreams import prespawn
start = prespawn.start
def recording(servers):
    open(out, "w").write(json.dumps(sorted(sys.modules)))
    start(servers)
prespawn.start = recording
from elicitgate.cli import app
app(prog_name="elicitgate")
"""
"""`elicitgate ...` that writes the names of the modules imported by the time it starts its stdio servers."""
SDK_MODELS = {"mcp_types", "mcp_types._types", "mcp.shared.exceptions", "mcp.server.lowlevel.server"}


def test_the_stdio_servers_start_before_the_gateway_imports_the_sdk(tmp_path):
    """`serve` starts its stdio servers as soon as it has read its configuration (`upstreams.prespawn`), so that
    their start-up overlaps the gateway's: reading it imports neither the SDK's models (`mcp_types`, ~0.2 s of
    CPU) nor the gateway itself."""
    demo = {"command": PY, "args": ["-m", "elicitgate.demo.server"]}
    config = write_config(tmp_path, {"demo": demo}, audit={"enabled": False})
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [PY, "-c", MODULES_AT_PRESPAWN, str(out), "serve", "--config", str(config)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    modules = set(json.loads(out.read_text()))
    assert "elicitgate.config" in modules  # it had read the configuration
    # `uvicorn` itself is there as a package whose `__init__` has not run (`sdk_packages.OTHER_PACKAGES`): its modules
    assert modules & (SDK_MODELS | {"elicitgate.errors", "elicitgate.gateway", "uvicorn.config", "uvicorn.main",
                                    "starlette"}) == set()
