//! The admin console (the virtual database `pgharbor`) and the metrics endpoint.

use std::sync::Arc;

use bytes::BytesMut;

use crate::client::ClientError;
use crate::pooler::Pooler;
use crate::protocol::FrameBuf;
use crate::stream::Stream;

/// Runs an admin console session for an authenticated `user`. `reply` holds
/// what must precede AuthenticationOk (a SCRAM server-final message).
pub async fn serve(
    stream: &mut Stream,
    buf: &mut FrameBuf,
    pooler: &Arc<Pooler>,
    user: &str,
    reply: BytesMut,
) -> Result<(), ClientError> {
    let _ = (stream, buf, pooler, user, reply);
    Err(ClientError::Refused(crate::protocol::PgError::fatal(
        "3D000",
        "database \"pgharbor\" does not exist",
    )))
}
