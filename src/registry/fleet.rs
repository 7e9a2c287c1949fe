//! How the cancel keys of a fleet instance say whose they are.
//!
//! Instances sharing a port through SO_REUSEPORT cannot choose which one
//! the kernel hands a CancelRequest to, so every key names the instance
//! that issued it, in its secret (the process id may be a real backend's,
//! in session pooling, and must stay so). PgBouncer's `peer_id` puts its id
//! and a hop counter into its 8-byte key the same way. The layout, on the
//! secret's leading bytes, where a longer secret (protocol 3.2, were it
//! offered) would keep it too:
//!
//! ```text
//! byte 0         byte 1              bytes 2..
//! instance id    hh rrrrrr           random
//!                hops left (2 bits), then random
//! ```
//!
//! A 3.0 secret (4 bytes, the only kind pgharbor hands out: it offers
//! clients protocol 3.0) keeps 22 random bits; outside session pooling the
//! process id adds 31 more. Hops bound forwarding between instances whose
//! `[peers]` tables disagree: an instance forwards only a key with a hop
//! left, and takes one off. No I/O.

use crate::config::InstanceId;

/// The hops a key starts with: forwarded at most three times, enough for a
/// cancel that lands on a host's shared port, is sent to another host's
/// shared port and from there to the instance (PgBouncer allows three).
pub const HOPS: u8 = 3;
/// The byte of the secret that holds the instance id.
const ID_BYTE: usize = 0;
/// The byte of the secret whose top bits hold the hop counter.
const HOPS_BYTE: usize = 1;
/// Where the hop counter sits in its byte.
const HOPS_SHIFT: u32 = 6;
/// The bits of its byte that are the hop counter.
const HOPS_MASK: u8 = 0b1100_0000;

/// What an instance does with a CancelRequest's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// One of ours (or we are in no fleet): look it up with this secret,
    /// the one we issued (hops restored).
    Local(i32),
    /// Another instance's, with hops left: send this secret (one hop fewer) there.
    Forward {
        /// Who issued it.
        to: InstanceId,
        /// The secret to send on.
        secret: i32,
    },
    /// Another instance's, with no hop left: dropped (a forwarding loop).
    Exhausted(InstanceId),
    /// A key no instance issues (id 0): dropped.
    Unowned,
}

/// A fresh secret of instance `me` from 32 random bits: its id in byte 0,
/// a full hop counter; outside a fleet, the random bits as they are.
pub fn mark(me: Option<InstanceId>, random: u32) -> i32 {
    let Some(me) = me else {
        return random as i32;
    };
    let mut b = random.to_be_bytes();
    b[ID_BYTE] = me.get();
    with_hops(b, HOPS)
}

/// The secret `b` with `hops` in its hop counter.
fn with_hops(mut b: [u8; 4], hops: u8) -> i32 {
    b[HOPS_BYTE] = (b[HOPS_BYTE] & !HOPS_MASK) | (hops << HOPS_SHIFT);
    i32::from_be_bytes(b)
}

/// What instance `me` does with a CancelRequest carrying `secret`.
pub fn route(me: Option<InstanceId>, secret: i32) -> Route {
    let Some(me) = me else {
        return Route::Local(secret);
    };
    let b = secret.to_be_bytes();
    let hops = (b[HOPS_BYTE] & HOPS_MASK) >> HOPS_SHIFT;
    let Some(owner) = InstanceId::new(b[ID_BYTE]) else {
        return Route::Unowned;
    };
    if owner == me {
        // Ours, maybe back from a detour: compare it as it was issued.
        return Route::Local(with_hops(b, HOPS));
    }
    match hops.checked_sub(1) {
        Some(left) => Route::Forward {
            to: owner,
            secret: with_hops(b, left),
        },
        None => Route::Exhausted(owner),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u8) -> InstanceId {
        InstanceId::new(n).unwrap()
    }

    #[test]
    fn a_key_names_its_instance_and_keeps_the_other_bits() {
        for (me, random) in [
            (1, 0u32),
            (255, u32::MAX),
            (7, 0x1234_5678),
            (128, 0xdead_beef),
        ] {
            let secret = mark(Some(id(me)), random);
            let b = secret.to_be_bytes();
            assert_eq!(b[0], me);
            assert_eq!(b[1] >> 6, HOPS, "{secret:#x}");
            assert_eq!(b[1] & 0x3f, random.to_be_bytes()[1] & 0x3f);
            assert_eq!(&b[2..], &random.to_be_bytes()[2..]);
            assert_eq!(route(Some(id(me)), secret), Route::Local(secret));
        }
    }

    #[test]
    fn outside_a_fleet_keys_are_all_random_and_all_local() {
        assert_eq!(mark(None, 0xdead_beef), 0xdead_beef_u32 as i32);
        assert_eq!(route(None, 0), Route::Local(0));
        assert_eq!(route(None, -1), Route::Local(-1));
    }

    #[test]
    fn a_foreign_key_is_forwarded_until_its_hops_run_out() {
        let issued = mark(Some(id(2)), 0x00ff_1234);
        let mut secret = issued;
        for hop in 0..HOPS {
            match route(Some(id(1)), secret) {
                Route::Forward { to, secret: next } => {
                    assert_eq!(to, id(2), "hop {hop}");
                    assert_eq!(next.to_be_bytes()[1] >> 6, HOPS - hop - 1);
                    secret = next;
                }
                other => panic!("hop {hop}: {other:?}"),
            }
        }
        assert_eq!(route(Some(id(1)), secret), Route::Exhausted(id(2)));
        // However many hops it took, the owner finds the key it issued.
        assert_eq!(route(Some(id(2)), secret), Route::Local(issued));
    }

    #[test]
    fn any_32_bits_get_a_route_and_id_0_is_nobody() {
        let me = Some(id(9));
        for secret in [0, 1, -1, i32::MIN, i32::MAX, 0x00ff_ffff, 0x0900_0000] {
            let r = route(me, secret);
            match secret.to_be_bytes()[0] {
                0 => assert_eq!(r, Route::Unowned, "{secret:#x}"),
                9 => assert!(matches!(r, Route::Local(_)), "{secret:#x}"),
                _ => assert!(
                    matches!(r, Route::Forward { .. } | Route::Exhausted(_)),
                    "{secret:#x}: {r:?}"
                ),
            }
        }
    }
}
