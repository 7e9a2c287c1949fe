//! Typed, borrowed views of the message bodies the pooler looks inside.
//!
//! Each view takes a message BODY (the bytes after the 1-byte type and the
//! 4-byte length) and borrows from it: nothing is copied or allocated on the
//! success path, no index is unchecked, and a malformed body is a
//! [`Violation`], never a panic. Client messages are checked the way
//! PostgreSQL's `postgres.c` reads them with `pqformat.c`, and their errors
//! carry PostgreSQL's own wording, because the pooler may answer a client
//! with that text in place of the server. Server messages are checked the way
//! libpq reads them (every byte of the declared length used); their errors
//! say which server message was broken, since they end up in the pooler's
//! log rather than in front of a client.

mod client;
mod fields;
mod reader;
mod server;
#[cfg(test)]
mod tests;

pub use client::{BindHead, Close, Describe, Execute, Parse, Target};
pub use fields::{FieldIter, Fields};
pub use server::{BackendKeyData, CopyResponse, ParameterStatus, ReadyForQuery, TxStatus};
