//! First-match over the rules, as PostgreSQL's `check_hba`, and the FATAL
//! 28000 texts of `ClientAuthentication` for a connection no rule admits.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::sync::Arc;

use super::rule::{Address, ConnType, DatabaseMatch, Method, Rule, UserMatch};
use super::Hba;
use crate::protocol::server::PgError;

/// How the client reached the pooler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A Unix-domain socket; `tls` when `socketsslmode` put TLS on it
    /// (`local` lines match either way, as they have no TLS variant).
    Local {
        /// TLS is in use on the socket.
        tls: bool,
    },
    /// TCP from `addr`.
    Tcp {
        /// The client's address, as the socket reports it.
        addr: IpAddr,
        /// TLS is in use.
        tls: bool,
    },
}

impl Transport {
    fn tls(self) -> bool {
        match self {
            Transport::Local { tls } | Transport::Tcp { tls, .. } => tls,
        }
    }
}

/// What the rules look at in a login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnFacts<'a> {
    /// Socket type, address and TLS state.
    pub transport: Transport,
    /// The startup packet's database.
    pub database: &'a str,
    /// The startup packet's user.
    pub user: &'a str,
}

/// One address of this machine with its netmask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interface {
    /// The address.
    pub addr: IpAddr,
    /// Its netmask, of the same family.
    pub netmask: IpAddr,
}

impl Interface {
    /// An interface address; a missing, all-zero or wrong-family mask
    /// becomes the all-ones mask, as PostgreSQL's `run_ifaddr_callback`.
    pub fn new(addr: IpAddr, netmask: Option<IpAddr>) -> Interface {
        let netmask = match netmask {
            Some(m) if m.is_ipv4() == addr.is_ipv4() && !m.is_unspecified() => m,
            _ => full_mask(addr),
        };
        Interface { addr, netmask }
    }
}

fn full_mask(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from(u32::MAX)),
        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(u128::MAX)),
    }
}

/// Where `samehost` and `samenet` get this machine's addresses. Asked at
/// most once per match, and only when such a rule is reached.
pub trait Interfaces: Send + Sync {
    /// The current interface addresses.
    fn list(&self) -> std::io::Result<Vec<Interface>>;
}

/// Fixed interfaces (tests, or a caller that cached them).
impl Interfaces for Vec<Interface> {
    fn list(&self) -> std::io::Result<Vec<Interface>> {
        Ok(self.clone())
    }
}

/// The machine's interfaces, from `getifaddrs(3)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemInterfaces;

impl Interfaces for SystemInterfaces {
    fn list(&self) -> std::io::Result<Vec<Interface>> {
        let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
        // SAFETY: getifaddrs writes a list head we free below.
        if unsafe { libc::getifaddrs(&mut head) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut found = Vec::new();
        let mut cursor = head;
        while !cursor.is_null() {
            // SAFETY: a non-null node of the list getifaddrs returned.
            let node = unsafe { &*cursor };
            // SAFETY: the node's sockaddr pointers are null or valid.
            if let Some(addr) = unsafe { sockaddr_ip(node.ifa_addr) } {
                let mask = unsafe { sockaddr_ip(node.ifa_netmask) };
                found.push(Interface::new(addr, mask));
            }
            cursor = node.ifa_next;
        }
        // SAFETY: the head getifaddrs returned, freed once.
        unsafe { libc::freeifaddrs(head) };
        Ok(found)
    }
}

/// The IP address in a sockaddr, if it is IPv4 or IPv6.
///
/// # Safety
/// `sa` is null or points to a sockaddr as long as its family says.
unsafe fn sockaddr_ip(sa: *const libc::sockaddr) -> Option<IpAddr> {
    if sa.is_null() {
        return None;
    }
    match i32::from((*sa).sa_family) {
        libc::AF_INET => {
            let sin = std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in>());
            Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))))
        }
        libc::AF_INET6 => {
            let sin6 = std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>());
            Some(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)))
        }
        _ => None,
    }
}

/// `(a & mask) == (b & mask)`, false across families.
fn same_under_mask(a: IpAddr, b: IpAddr, mask: IpAddr) -> bool {
    match (a, b, mask) {
        (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(m)) => {
            let m = u32::from(m);
            u32::from(a) & m == u32::from(b) & m
        }
        (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(m)) => {
            let m = u128::from(m);
            u128::from(a) & m == u128::from(b) & m
        }
        _ => false,
    }
}

/// The interface list of one match, fetched on first use.
struct LazyInterfaces<'a> {
    source: &'a dyn Interfaces,
    list: Option<Vec<Interface>>,
}

impl LazyInterfaces<'_> {
    fn get(&mut self) -> &[Interface] {
        self.list.get_or_insert_with(|| {
            self.source.list().unwrap_or_else(|e| {
                // PostgreSQL logs this and lets the rule not match.
                tracing::warn!("error enumerating network interfaces: {e}");
                Vec::new()
            })
        })
    }
}

impl Address {
    fn admits(&self, client: IpAddr, interfaces: &mut LazyInterfaces<'_>) -> bool {
        match self {
            Address::All => true,
            Address::Cidr(net) => net.contains(&client),
            Address::Masked { addr, mask } => same_under_mask(client, *addr, *mask),
            Address::SameHost => (interfaces.get().iter())
                .any(|i| same_under_mask(client, i.addr, full_mask(i.addr))),
            Address::SameNet => {
                (interfaces.get().iter()).any(|i| same_under_mask(client, i.addr, i.netmask))
            }
        }
    }
}

impl DatabaseMatch {
    fn admits(&self, database: &str, user: &str) -> bool {
        match self {
            DatabaseMatch::All => true,
            DatabaseMatch::SameUser => database == user,
            DatabaseMatch::Replication => false,
            DatabaseMatch::Name(name) => name == database,
            DatabaseMatch::Regex(re) => re.regex.is_match(database),
        }
    }
}

impl UserMatch {
    fn admits(&self, user: &str) -> bool {
        match self {
            UserMatch::All => true,
            UserMatch::Name(name) => name == user,
            UserMatch::Regex(re) => re.regex.is_match(user),
        }
    }
}

impl Rule {
    fn admits(&self, facts: &ConnFacts<'_>, interfaces: &mut LazyInterfaces<'_>) -> bool {
        let transport_ok = match (self.conn_type, facts.transport) {
            (ConnType::Local, Transport::Local { .. }) => true,
            (ConnType::Local, Transport::Tcp { .. }) | (_, Transport::Local { .. }) => false,
            (conn_type, Transport::Tcp { addr, tls }) => {
                let tls_ok = match conn_type {
                    ConnType::HostSsl => tls,
                    ConnType::HostNoSsl => !tls,
                    _ => true,
                };
                tls_ok && (self.address.as_ref()).is_some_and(|a| a.admits(addr, interfaces))
            }
        };
        transport_ok
            && (self.databases.iter()).any(|d| d.admits(facts.database, facts.user))
            && self.users.iter().any(|u| u.admits(facts.user))
    }
}

/// Why a login is refused before any credential is asked for; always
/// FATAL with SQLSTATE 28000 (invalid_authorization_specification).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HbaRefusal {
    /// The `reject` rule that matched (file, line), or `None` when no rule
    /// did.
    pub rejected_by: Option<(Arc<Path>, usize)>,
    /// PostgreSQL's message.
    pub message: String,
}

impl HbaRefusal {
    /// The SQLSTATE of every refusal.
    pub const SQLSTATE: &'static str = "28000";

    /// The ErrorResponse to send.
    pub fn to_pg_error(&self) -> PgError {
        PgError::fatal(Self::SQLSTATE, self.message.clone())
    }

    fn new(facts: &ConnFacts<'_>, rejected_by: Option<&Rule>) -> HbaRefusal {
        let host = match facts.transport {
            Transport::Local { .. } => "[local]".to_owned(),
            Transport::Tcp { addr, .. } => addr.to_string(),
        };
        let encryption = match facts.transport.tls() {
            true => "SSL encryption",
            false => "no encryption",
        };
        let (user, database) = (facts.user, facts.database);
        let message = match rejected_by {
            None => format!(
                "no pg_hba.conf entry for host \"{host}\", user \"{user}\", database \"{database}\", {encryption}"
            ),
            Some(_) => format!(
                "pg_hba.conf rejects connection for host \"{host}\", user \"{user}\", database \"{database}\", {encryption}"
            ),
        };
        HbaRefusal {
            rejected_by: rejected_by.map(|r| (r.file.clone(), r.line)),
            message,
        }
    }
}

impl Hba {
    /// The first rule that matches `facts`, if any (a `reject` rule too).
    pub fn matches(&self, facts: &ConnFacts<'_>) -> Option<&Rule> {
        let mut interfaces = LazyInterfaces {
            source: self.interfaces.as_ref(),
            list: None,
        };
        self.rules.iter().find(|r| r.admits(facts, &mut interfaces))
    }

    /// The rule that admits `facts`, or the refusal to send: no rule
    /// matched, or the first match is `reject`.
    pub fn decide(&self, facts: &ConnFacts<'_>) -> Result<&Rule, HbaRefusal> {
        match self.matches(facts) {
            Some(rule) if rule.method == Method::Reject => Err(HbaRefusal::new(facts, Some(rule))),
            Some(rule) => Ok(rule),
            None => Err(HbaRefusal::new(facts, None)),
        }
    }
}
