//! Addresses the proxy refuses whatever name led to them.
//!
//! A name on the allowlist may still resolve (by accident, a hostile resolver or DNS
//! rebinding) to the host itself, the local network or a cloud metadata service; the proxy
//! refuses those addresses unless the address itself is on the allowlist.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IPv4 blocks the proxy never connects to by name: (network, prefix length, class), most
/// specific first (the first match names the class).
const V4: &[([u8; 4], u8, &str)] = &[
    ([169, 254, 169, 254], 32, "cloud metadata"),
    ([255, 255, 255, 255], 32, "broadcast"),
    ([0, 0, 0, 0], 32, "unspecified"),
    ([0, 0, 0, 0], 8, "this network"),
    ([10, 0, 0, 0], 8, "private"),
    ([100, 64, 0, 0], 10, "CGNAT shared"),
    ([127, 0, 0, 0], 8, "loopback"),
    ([169, 254, 0, 0], 16, "link-local"),
    ([172, 16, 0, 0], 12, "private"),
    ([192, 0, 0, 0], 24, "IETF protocol assignments"),
    ([192, 0, 2, 0], 24, "documentation"),
    ([192, 88, 99, 0], 24, "6to4 relay anycast"),
    ([192, 168, 0, 0], 16, "private"),
    ([198, 18, 0, 0], 15, "benchmarking"),
    ([198, 51, 100, 0], 24, "documentation"),
    ([203, 0, 113, 0], 24, "documentation"),
    ([224, 0, 0, 0], 4, "multicast"),
    ([240, 0, 0, 0], 4, "reserved"),
];

/// IPv6 blocks (after the forms embedding an IPv4 address are taken apart).
const V6: &[([u16; 8], u8, &str)] = &[
    ([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified"),
    ([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback"),
    ([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "NAT64 local-use"),
    ([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only"),
    ([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation"),
    (
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments",
    ),
    ([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation"),
    ([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local"),
    ([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local"),
    ([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local"),
    ([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
];

/// The class of address `ip` belongs to if the proxy refuses it by name, `None` for a
/// global address. IPv6 forms embedding an IPv4 address (mapped `::ffff:a.b.c.d`,
/// compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are classified by it.
pub(crate) fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let bits = u32::from(ip);
    V4.iter()
        .find(|(net, len, _)| prefix_eq32(bits, u32::from_be_bytes(*net), *len))
        .map(|(_, _, class)| *class)
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let bits = u128::from(ip);
    V6.iter()
        .find(|(net, len, _)| prefix_eq128(bits, u128::from(Ipv6Addr::from(*net)), *len))
        .map(|(_, _, class)| *class)
}

/// The IPv4 address an IPv6 address carries, for the forms that route to it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // IPv4-mapped ::ffff:a.b.c.d.
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        // IPv4-compatible ::a.b.c.d (not :: and ::1, which are IPv6's own).
        [0, 0, 0, 0, 0, 0, hi, lo] if hi != 0 || lo > 1 => Some(low),
        // NAT64 well-known prefix 64:ff9b::/96.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        // 6to4 2002:AABB:CCDD::/48.
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

fn prefix_eq32(a: u32, b: u32, len: u8) -> bool {
    let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
    a & mask == b & mask
}

fn prefix_eq128(a: u128, b: u128, len: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    a & mask == b & mask
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let table: &[(&str, Option<&str>)] = &[
            ("127.0.0.1", Some("loopback")),
            ("127.255.0.9", Some("loopback")),
            ("10.1.2.3", Some("private")),
            ("172.16.0.1", Some("private")),
            ("172.31.255.255", Some("private")),
            ("172.32.0.1", None),
            ("192.168.1.1", Some("private")),
            ("169.254.169.254", Some("cloud metadata")),
            ("169.254.1.1", Some("link-local")),
            ("100.64.0.1", Some("CGNAT shared")),
            ("100.127.255.255", Some("CGNAT shared")),
            ("100.128.0.1", None),
            ("224.0.0.1", Some("multicast")),
            ("239.255.255.250", Some("multicast")),
            ("255.255.255.255", Some("broadcast")),
            ("0.0.0.0", Some("unspecified")),
            ("0.1.2.3", Some("this network")),
            ("240.0.0.1", Some("reserved")),
            ("192.0.0.8", Some("IETF protocol assignments")),
            ("198.18.0.1", Some("benchmarking")),
            ("198.19.255.1", Some("benchmarking")),
            ("198.20.0.1", None),
            ("192.0.2.1", Some("documentation")),
            ("198.51.100.7", Some("documentation")),
            ("203.0.113.9", Some("documentation")),
            ("8.8.8.8", None),
            ("151.101.0.223", None),
            ("::1", Some("loopback")),
            ("::", Some("unspecified")),
            ("fe80::1", Some("link-local")),
            ("febf::1", Some("link-local")),
            ("fc00::1", Some("unique-local")),
            ("fd00:ec2::254", Some("unique-local")),
            ("ff02::1", Some("multicast")),
            ("2001:db8::1", Some("documentation")),
            ("::ffff:127.0.0.1", Some("loopback")),
            ("::ffff:169.254.169.254", Some("cloud metadata")),
            ("::ffff:8.8.8.8", None),
            ("::10.0.0.1", Some("private")),
            ("64:ff9b::7f00:1", Some("loopback")),
            ("64:ff9b::808:808", None),
            ("2002:c0a8:0101::1", Some("private")),
            ("2002:0808:0808::1", None),
            ("2606:4700::1111", None),
            ("2a00:1450:4001::1", None),
        ];
        for (text, class) in table {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(forbidden(ip), *class, "{text}");
        }
    }
}
