"""The IPv4 addresses an IPv6 address carries, so that the URL policy checks `[::127.0.0.1]` as 127.0.0.1.

A browser (or the network under it) that is sent to one of these forms may reach the IPv4 address inside:
IPv4-mapped (`::ffff:a.b.c.d`, RFC 4291), IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765),
IPv4-compatible (`::a.b.c.d`, RFC 4291, deprecated but still routed by some stacks), 6to4 (`2002::/16`,
RFC 3056) and NAT64: the well-known prefix `64:ff9b::/96` and the local-use `64:ff9b:1::/48` (RFC 6052,
RFC 8215). The local-use prefix may be cut at /48, /56, /64 or /96 by the network that uses it, and the
IPv4 address sits at a different place for each (RFC 6052 section 2.2, around the zero octet at bits
64-71), so every place the address could hold one is returned.
"""

from __future__ import annotations

import ipaddress

MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
COMPATIBLE = ipaddress.IPv6Network("::/96")
NOT_COMPATIBLE = ipaddress.IPv6Network("::/127")
"""`::` and `::1` are the unspecified and loopback addresses, not IPv4-compatible ones."""
SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_LOCAL_CUTS = (48, 56, 64)
"""Prefix lengths within the local-use /48 that embed the IPv4 address around octet 8 (the /96 one
takes the last 32 bits, as the well-known prefix does)."""
_UNSPECIFIED = ipaddress.IPv4Address(0)


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses `address` carries (empty: none; it is checked by the IPv6 rules alone)."""
    if address in MAPPED or address in TRANSLATED or address in NAT64_WELL_KNOWN:
        return [_last_32_bits(address)]
    if address in COMPATIBLE:
        return [] if address in NOT_COMPATIBLE else [_last_32_bits(address)]
    if address in SIX_TO_FOUR:
        return [address.sixtofour] if address.sixtofour is not None else []
    if address in NAT64_LOCAL:
        found = [_rfc6052(address, cut) for cut in _LOCAL_CUTS if _fits_rfc6052(address, cut)]
        found.append(_last_32_bits(address))
        # A zero IPv4 address is what a cut the network does not use reads; another cut is the real one.
        meaningful = [v4 for v4 in found if v4 != _UNSPECIFIED]
        return meaningful or [_UNSPECIFIED]
    return []


def _last_32_bits(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)


def _octets_after(cut: int) -> list[int]:
    """The octet positions after a prefix of `cut` bits, skipping octet 8 (RFC 6052's `u`, always zero)."""
    return [i for i in range(cut // 8, 16) if i != 8]


def _fits_rfc6052(address: ipaddress.IPv6Address, cut: int) -> bool:
    """Whether `address` has the shape of an RFC 6052 address with a prefix of `cut` bits (zero `u` octet
    and zero suffix)."""
    packed = address.packed
    return packed[8] == 0 and not any(packed[i] for i in _octets_after(cut)[4:])


def _rfc6052(address: ipaddress.IPv6Address, cut: int) -> ipaddress.IPv4Address:
    packed = address.packed
    return ipaddress.IPv4Address(bytes(packed[i] for i in _octets_after(cut)[:4]))
