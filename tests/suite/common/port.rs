//! A port for a server a test starts later, whose address another process must know first
//! (a design API is told the fake provider's URL before `idem-check --provider-listen` binds
//! it; a restarted design comes back on its old port).
//!
//! A port found by binding port 0 and letting go of it lies in the kernel's ephemeral range,
//! from which every outgoing connection on the machine takes its local port: on a busy suite
//! one of them took the port in between, and the run could not listen. So the port is drawn
//! below that range, where only listeners are ever placed, checked free by binding it, and
//! never handed out twice by this process.

use std::collections::HashSet;
use std::net::TcpListener;
use std::sync::Mutex;

/// Where ports are drawn when the ephemeral range cannot be read (Linux's default starts at
/// 32768).
const BELOW: u16 = 32768;
/// The lowest port drawn: above the registered services most machines run.
const FROM: u16 = 20000;

static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A port on 127.0.0.1 that was free a moment ago and that no outgoing connection will take.
pub fn unused() -> u16 {
    let below = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .filter(|&start| start > FROM + 1000)
        .unwrap_or(BELOW);
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    let span = u32::from(below - FROM);
    // Start at a point that differs between test processes, then walk the range.
    let start = std::process::id() % span;
    (0..span)
        .map(|i| FROM + ((start + i * 7919) % span) as u16)
        .find(|&port| !handed_out.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok())
        .inspect(|&port| {
            handed_out.insert(port);
        })
        .expect("a free port below the ephemeral range")
}
