"""Which address a request comes from (hitl.security.client_address): X-Forwarded-For is
read only from trusted proxies, from the right. The compose-level test of the login
lockout is in tests/ops/test_compose.py."""

from __future__ import annotations

import pytest

from hitl.security import client_address, trusted_networks

PROXIES = trusted_networks(["127.0.0.1", "10.0.0.0/8", "::1"])


@pytest.mark.parametrize(
    ("peer", "forwarded", "trusted", "expected"),
    [
        # No trusted proxy: the header is never read.
        ("203.0.113.9", ["1.2.3.4"], (), "203.0.113.9"),
        ("127.0.0.1", ["1.2.3.4"], (), "127.0.0.1"),
        # An untrusted peer cannot pick its address.
        ("203.0.113.9", ["1.2.3.4"], PROXIES, "203.0.113.9"),
        # A trusted proxy: the right-most entry that is not a trusted proxy.
        ("127.0.0.1", ["198.51.100.7"], PROXIES, "198.51.100.7"),
        ("127.0.0.1", ["1.2.3.4, 198.51.100.7"], PROXIES, "198.51.100.7"),
        ("127.0.0.1", ["1.2.3.4, 198.51.100.7, 10.1.2.3"], PROXIES, "198.51.100.7"),
        ("127.0.0.1", ["1.2.3.4", "198.51.100.7, 10.1.2.3"], PROXIES, "198.51.100.7"),
        ("::1", ["[2001:db8::5]:4431"], PROXIES, "2001:db8::5"),
        ("127.0.0.1", ["198.51.100.7:5100"], PROXIES, "198.51.100.7"),
        # Every hop trusted: the furthest one.
        ("127.0.0.1", ["10.9.9.9, 10.1.1.1"], PROXIES, "10.9.9.9"),
        # Garbage ends the walk at the proxy that passed it on.
        ("127.0.0.1", ["1.2.3.4, not-an-address, 10.1.1.1"], PROXIES, "10.1.1.1"),
        ("127.0.0.1", ["unknown"], PROXIES, "127.0.0.1"),
        # A trusted proxy that sent no header.
        ("127.0.0.1", [], PROXIES, "127.0.0.1"),
    ],
)
def test_the_client_address_is_the_right_most_untrusted_entry(peer, forwarded, trusted, expected):
    assert client_address(peer, forwarded, trusted) == expected


def test_a_bad_trusted_proxy_setting_stops_the_start(tmp_path):
    import os
    import subprocess

    from tests.conftest import PYTHON, ROOT

    env = {**os.environ, "HITL_TRUSTED_PROXIES": "127.0.0.1,proxy.local"}
    env.pop("DATABASE_URL", None)
    out = subprocess.run(
        [PYTHON, "manage.py", "check"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode != 0
    assert "HITL_TRUSTED_PROXIES: 'proxy.local' is not an address" in out.stderr
