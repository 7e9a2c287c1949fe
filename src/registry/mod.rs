//! What the sessions of one pooler share about each other: the cancel keys
//! handed to clients, the logged-in clients (for SHOW CLIENTS), and the
//! prepared statements of transaction pooling. Kept below `client`, `admin`
//! and `pooler` so that all three can hold them without depending on each
//! other; it knows backends only as cancel targets.

pub mod cancel;
pub mod clients;
pub mod fleet;
pub mod secrets;
pub mod signals;
pub mod statements;

pub use cancel::{CancelKey, CancelRegistry, CancelSlot};
pub use clients::{ClientEntry, ClientInfo, ClientRegistry, ClientState, NewClient, Waiting};
pub use secrets::SecretCache;
pub use signals::{End, Signals};
pub use statements::{Statement, StatementRegistry};
