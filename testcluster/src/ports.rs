//! Free loopback ports for the components' listeners.

use std::net::{Ipv4Addr, TcpListener};

use crate::Error;

/// Picks `n` distinct TCP ports on 127.0.0.1 that are free right now.
///
/// The kernel assigns them (bind to port 0); all `n` listeners are held until every
/// port is known so the kernel cannot hand out the same port twice. Another process
/// could still take one before the component binds it — unlikely enough on a test
/// machine, and the component then fails fast with "address in use" in its log.
pub fn free_ports(n: usize) -> Result<Vec<u16>, Error> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::io("binding a loopback port to find a free one"))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Error::io("reading a bound loopback port"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_nonzero() {
        let mut ports = free_ports(5).unwrap();
        assert!(ports.iter().all(|&p| p != 0));
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 5);
    }
}
