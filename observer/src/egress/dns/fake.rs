//! Stable fake addresses per name, from private pools, with the reverse map so a later
//! connection to the address is attributed to the name.
//!
//! v4: 198.18.0.0/15 (the benchmarking range, never routed). v6: a ULA /64. The address of a name
//! is derived from a hash of the lowercased name, so the same name gets the same address in every
//! run (probing upward on collision); the jail's netfilter rules redirect these ranges like any other.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Mutex;

pub const V4_POOL: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 18, 0, 0), 15);
pub const V6_POOL: (Ipv6Addr, u8) = (
    Ipv6Addr::new(0xfd7a, 0x3c4e, 0x91b2, 0x5d00, 0, 0, 0, 0),
    64,
);
const V4_SIZE: u32 = 1 << (32 - V4_POOL.1);

#[derive(Debug, Default)]
struct State {
    v4: HashMap<String, Ipv4Addr>,
    v6: HashMap<String, Ipv6Addr>,
    names: HashMap<IpAddr, String>,
}

#[derive(Debug, Default)]
pub struct FakeIps {
    state: Mutex<State>,
}

fn hash(name: &str) -> [u8; 32] {
    Sha256::digest(name.as_bytes()).into()
}

fn canonical(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

impl FakeIps {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned map is still a consistent map (inserts are single statements).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The v4 address of `name`; `None` when the pool is exhausted.
    pub fn v4(&self, name: &str) -> Option<Ipv4Addr> {
        let name = canonical(name);
        let mut st = self.lock();
        if let Some(a) = st.v4.get(&name) {
            return Some(*a);
        }
        if st.v4.len() as u32 >= V4_SIZE - 2 {
            return None;
        }
        let h = hash(&name);
        let base = u32::from(V4_POOL.0);
        // Host part in 1..SIZE-1 (skip the all-zero and all-one addresses).
        let mut off = u32::from_be_bytes([h[0], h[1], h[2], h[3]]) % (V4_SIZE - 2) + 1;
        loop {
            let a = Ipv4Addr::from(base + off);
            if let std::collections::hash_map::Entry::Vacant(e) = st.names.entry(IpAddr::V4(a)) {
                e.insert(name.clone());
                st.v4.insert(name, a);
                return Some(a);
            }
            off = off % (V4_SIZE - 2) + 1;
        }
    }

    pub fn v6(&self, name: &str) -> Ipv6Addr {
        let name = canonical(name);
        let mut st = self.lock();
        if let Some(a) = st.v6.get(&name) {
            return *a;
        }
        let h = hash(&name);
        let mut iid =
            u64::from_be_bytes([h[8], h[9], h[10], h[11], h[12], h[13], h[14], h[15]]).max(1);
        loop {
            let a = Ipv6Addr::from(u128::from(V6_POOL.0) | u128::from(iid));
            if let std::collections::hash_map::Entry::Vacant(e) = st.names.entry(IpAddr::V6(a)) {
                e.insert(name.clone());
                st.v6.insert(name, a);
                return a;
            }
            iid = iid.wrapping_add(1).max(1);
        }
    }

    /// The name a fake address was handed out for.
    pub fn lookup_name(&self, ip: IpAddr) -> Option<String> {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.lock().names.get(&ip).cloned()
    }

    /// Whether `ip` lies in one of the pools (handed out or not).
    pub fn in_pool(ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => {
                u32::from(a) >> (32 - V4_POOL.1) == u32::from(V4_POOL.0) >> (32 - V4_POOL.1)
            }
            IpAddr::V6(a) => u128::from(a) >> 64 == u128::from(V6_POOL.0) >> 64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_distinct_reversible() {
        let f = FakeIps::new();
        let a = f.v4("Exfil.Example.com.").unwrap();
        assert_eq!(f.v4("exfil.example.com"), Some(a));
        assert!(FakeIps::in_pool(IpAddr::V4(a)));
        assert_ne!(f.v4("other.example.com"), Some(a));
        assert_eq!(
            f.lookup_name(IpAddr::V4(a)).as_deref(),
            Some("exfil.example.com")
        );
        let six = f.v6("exfil.example.com");
        assert!(FakeIps::in_pool(IpAddr::V6(six)));
        assert_eq!(
            f.lookup_name(IpAddr::V6(six)).as_deref(),
            Some("exfil.example.com")
        );
        // Same name, fresh pool (next run): same address.
        assert_eq!(FakeIps::new().v4("exfil.example.com"), Some(a));
        assert!(f.lookup_name("8.8.8.8".parse().unwrap()).is_none());
    }

    #[test]
    fn many_names_never_collide() {
        let f = FakeIps::new();
        let mut seen = std::collections::HashSet::new();
        for i in 0..20_000 {
            assert!(seen.insert(f.v4(&format!("n{i}.example")).unwrap()));
        }
    }
}
