//! The differential protocol harness: seeded sequences of frontend
//! messages, run against PostgreSQL directly and through pgharbor in each
//! pool mode, whose replies must be the same except for the documented
//! differences listed in [`norm`].
//!
//! - [`rng`]: the deterministic PRNG.
//! - [`msg`]: frontend messages, their encoding and a well-formedness check.
//! - [`gen`]: the generator (pure: a seed and a mode give a sequence).
//! - [`conn`]: the harness's client connection and admin connection.
//! - [`norm`]: how backend messages are rendered and what is normalised.
//! - [`run`]: plays a sequence on a target, checks what it left behind,
//!   compares transcripts.
//! - [`campaign`]: one mode's run over many seeds, with reports.

pub mod campaign;
pub mod conn;
pub mod gen;
pub mod msg;
pub mod norm;
pub mod rng;
pub mod run;
