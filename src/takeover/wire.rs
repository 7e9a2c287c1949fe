//! The control socket's messages: a 4-byte big-endian length, then one JSON
//! object, with listening sockets riding along as SCM_RIGHTS on the frame
//! that announces them. Pure framing ([`parse`], [`encode`]) is kept apart
//! from the blocking I/O ([`Conn`]) so malformed input is tested without
//! sockets.

use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags};
use serde::{Deserialize, Serialize};

use super::moved::MovedClient;

/// The takeover protocol version this binary speaks; a peer speaking
/// another is refused before any socket changes hands. 2: the old process
/// hands idle transaction-pooling clients over ([`Message::Client`]).
pub const VERSION: u32 = 2;
/// The oldest version this binary still speaks, either side: with a
/// version 1 peer the sockets change hands and the clients drain.
pub const OLDEST: u32 = 1;
/// The first version in which clients are handed over.
pub const HANDS_OVER_CLIENTS: u32 = 2;
/// Largest frame body accepted, checked before allocating for it: a
/// handed-over client's frame carries its prepared statements.
pub const MAX_FRAME: usize = 1024 * 1024;
/// Most descriptors one frame may carry (TCP addresses plus the Unix socket).
pub const MAX_FDS: usize = 32;
/// Bytes of the length prefix.
const LEN_PREFIX: usize = 4;

/// One control message; `type` names the variant on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Message {
    /// New → old: "I want your listeners", with the version it speaks.
    Hello {
        /// The new binary's [`VERSION`].
        version: u32,
    },
    /// Old → new: the listening sockets, `sockets` of them attached.
    Offer {
        /// The old binary's [`VERSION`].
        version: u32,
        /// How many descriptors ride on this frame.
        sockets: usize,
    },
    /// Old → new: no handover (another version, or one already under way).
    Refused {
        /// The old binary's [`VERSION`].
        version: u32,
        /// Why, for the operator.
        reason: String,
    },
    /// New → old: accepting on the sockets now; stop accepting.
    Accepting {
        /// The new process.
        pid: u32,
    },
    /// Old → new: its accept loops are closed; it drains and exits.
    Draining {
        /// The old process.
        pid: u32,
    },
    /// New → old, while the old one drains: a CancelRequest the new one
    /// has no key for, which may be for a client still on the old one.
    Cancel {
        /// The key's process id.
        pid: i32,
        /// The key's secret.
        secret: i32,
    },
    /// Old → new, while the old one drains: an idle transaction-pooling
    /// client, its socket attached, to serve from here on.
    Client {
        /// What the client's session is.
        client: Box<MovedClient>,
    },
}

impl Message {
    /// How many descriptors ride on this message's frame.
    pub fn descriptors(&self) -> usize {
        match self {
            Message::Offer { sockets, .. } => *sockets,
            Message::Client { .. } => 1,
            _ => 0,
        }
    }
}

/// Why a control conversation failed.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The length prefix announces more than [`MAX_FRAME`].
    #[error("control message of {0} bytes is longer than the {MAX_FRAME}-byte limit")]
    TooLong(usize),
    /// The body is not a message this version knows.
    #[error("malformed control message: {0}")]
    Json(#[from] serde_json::Error),
    /// The peer closed mid-frame or before answering.
    #[error("the peer closed the control connection{}", if *.0 { " in the middle of a message" } else { "" })]
    Closed(bool),
    /// More descriptors than [`MAX_FDS`] or than the frame announces.
    #[error("control message carried {got} descriptors, expected {want}")]
    Descriptors {
        /// Received.
        got: usize,
        /// Announced.
        want: usize,
    },
    /// The socket failed (or a read/write timed out).
    #[error("control socket: {0}")]
    Io(#[from] std::io::Error),
}

/// `msg` as one frame.
pub fn encode(msg: &Message) -> Vec<u8> {
    // A derived Serialize of strings and integers cannot fail.
    let body = serde_json::to_vec(msg).unwrap_or_default();
    let mut out = Vec::with_capacity(LEN_PREFIX + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// The first whole frame in `buf` and its length, `None` when more bytes are
/// needed. The length is checked before the body is waited for.
pub fn parse(buf: &[u8]) -> Result<Option<(Message, usize)>, WireError> {
    let Some(prefix) = buf.get(..LEN_PREFIX) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLong(len));
    }
    let Some(body) = buf.get(LEN_PREFIX..LEN_PREFIX + len) else {
        return Ok(None);
    };
    Ok(Some((serde_json::from_slice(body)?, LEN_PREFIX + len)))
}

/// One end of a control conversation, blocking (with the socket's own
/// timeouts): it is a handful of frames once per restart.
pub struct Conn {
    stream: UnixStream,
    buf: Vec<u8>,
    fds: Vec<OwnedFd>,
}

impl Conn {
    /// Wraps a connected blocking stream whose timeouts are already set.
    pub fn new(stream: UnixStream) -> Conn {
        Conn {
            stream,
            buf: Vec::new(),
            fds: Vec::new(),
        }
    }

    /// A second handle on the same connection, to read from here on while
    /// this one writes; it takes over what this one has read ahead (the
    /// peer's next frames, and their descriptors, may have come with the
    /// last one). Socket timeouts are shared by both.
    pub fn reader(&mut self) -> Result<Conn, WireError> {
        Ok(Conn {
            stream: self.stream.try_clone()?,
            buf: std::mem::take(&mut self.buf),
            fds: std::mem::take(&mut self.fds),
        })
    }

    /// Sends `msg`, with `fds` attached to its first byte.
    pub fn send(&mut self, msg: &Message, fds: &[RawFd]) -> Result<(), WireError> {
        self.send_frame(&encode(msg), fds)
    }

    /// Sends an encoded frame, with `fds` attached to its first byte.
    pub fn send_frame(&mut self, frame: &[u8], fds: &[RawFd]) -> Result<(), WireError> {
        let rights = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage] = if fds.is_empty() { &[] } else { &rights };
        let mut sent = sendmsg::<()>(
            self.stream.as_raw_fd(),
            &[IoSlice::new(frame)],
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(std::io::Error::from)?;
        while sent < frame.len() {
            let n = sendmsg::<()>(
                self.stream.as_raw_fd(),
                &[IoSlice::new(&frame[sent..])],
                &[],
                MsgFlags::MSG_NOSIGNAL,
                None,
            )
            .map_err(std::io::Error::from)?;
            sent += n;
        }
        Ok(())
    }

    /// The next message and the descriptors that came with it (as many as
    /// it announces). A frame's descriptors arrive with its first byte, so
    /// once the frame is whole they are queued, in the order sent; more
    /// than it announces may only belong to a frame that has begun.
    pub fn recv(&mut self) -> Result<(Message, Vec<OwnedFd>), WireError> {
        loop {
            if let Some((msg, used)) = parse(&self.buf)? {
                self.buf.drain(..used);
                let want = msg.descriptors();
                let got = self.fds.len();
                if got < want || (got > want && self.buf.is_empty()) {
                    self.fds.clear();
                    return Err(WireError::Descriptors { got, want });
                }
                let fds = self.fds.drain(..want).collect();
                return Ok((msg, fds));
            }
            let mut chunk = [0u8; 4096];
            let mut space = nix::cmsg_space!([RawFd; MAX_FDS]);
            let mut iov = [IoSliceMut::new(&mut chunk)];
            let got = recvmsg::<()>(
                self.stream.as_raw_fd(),
                &mut iov,
                Some(&mut space),
                MsgFlags::MSG_CMSG_CLOEXEC,
            )
            .map_err(std::io::Error::from)?;
            let n = got.bytes;
            let truncated = got.flags.contains(MsgFlags::MSG_CTRUNC);
            for cmsg in got.cmsgs().map_err(std::io::Error::from)? {
                if let ControlMessageOwned::ScmRights(raw) = cmsg {
                    // SAFETY: SCM_RIGHTS installed these descriptors in this
                    // process just now; nothing else owns them.
                    self.fds.extend(
                        raw.into_iter()
                            .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                    );
                }
            }
            if truncated {
                return Err(WireError::Descriptors {
                    got: MAX_FDS + 1,
                    want: MAX_FDS,
                });
            }
            if n == 0 {
                return Err(WireError::Closed(!self.buf.is_empty()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// No more read timeout: the conversation now lasts as long as the
    /// old process drains, carrying [`Message::Cancel`].
    pub fn wait_indefinitely(&mut self) -> Result<(), WireError> {
        self.stream.set_read_timeout(None)?;
        Ok(())
    }

    /// [`Conn::recv`] for a message that must come without descriptors.
    pub fn recv_plain(&mut self) -> Result<Message, WireError> {
        let (msg, fds) = self.recv()?;
        if !fds.is_empty() {
            return Err(WireError::Descriptors {
                got: fds.len(),
                want: 0,
            });
        }
        Ok(msg)
    }

    /// Stops reading: the peer's further writes fail (EPIPE), so a peer
    /// that sent something malformed learns that nothing more is taken.
    pub fn refuse_more(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Read);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_wait_for_whole_frames() {
        let msgs = [
            Message::Hello { version: VERSION },
            Message::Offer {
                version: VERSION,
                sockets: 2,
            },
            Message::Refused {
                version: 7,
                reason: "x \"y\"".into(),
            },
            Message::Accepting { pid: 42 },
            Message::Draining { pid: 41 },
            Message::Cancel {
                pid: -1,
                secret: i32::MIN,
            },
            Message::Client {
                client: Box::new(super::super::moved::tests::sample()),
            },
        ];
        for msg in msgs {
            let frame = encode(&msg);
            for cut in 0..frame.len() {
                assert!(parse(&frame[..cut]).unwrap().is_none(), "{msg:?} at {cut}");
            }
            let mut two = frame.clone();
            two.extend_from_slice(&frame);
            assert_eq!(parse(&two).unwrap(), Some((msg, frame.len())));
        }
    }

    #[test]
    fn malformed_frames_are_errors_not_panics() {
        let frame = |body: &[u8]| {
            let mut f = (body.len() as u32).to_be_bytes().to_vec();
            f.extend_from_slice(body);
            f
        };
        let bad: &[&[u8]] = &[
            b"",
            b"{",
            b"null",
            b"[]",
            b"{}",
            b"{\"type\":\"hello\"}",
            b"{\"type\":\"hello\",\"version\":-1}",
            b"{\"type\":\"hello\",\"version\":1,\"extra\":1}",
            b"{\"type\":\"shutdown\"}",
            b"{\"type\":\"offer\",\"version\":1,\"sockets\":\"2\"}",
            b"\xff\xfe",
            // Handed-over clients (version 2): missing, mistyped, unknown fields.
            b"{\"type\":\"client\"}",
            b"{\"type\":\"client\",\"client\":{}}",
            b"{\"type\":\"client\",\"client\":null}",
        ];
        for body in bad {
            assert!(
                matches!(parse(&frame(body)), Err(WireError::Json(_))),
                "{body:?}"
            );
        }
        let good = serde_json::to_value(super::super::moved::tests::sample()).unwrap();
        let spoilt = [
            ("transport", serde_json::json!("carrier-pigeon")),
            ("auth", serde_json::json!("scram-sha-1")),
            ("cancel_pid", serde_json::json!(1u64 << 40)),
            ("params", serde_json::json!([["a"]])),
            ("statements", serde_json::json!([{"name": "01"}])),
            ("extra", serde_json::json!(1)),
        ];
        for (key, value) in spoilt {
            let mut c = good.clone();
            c[key] = value;
            let body = serde_json::json!({"type": "client", "client": c}).to_string();
            assert!(
                matches!(parse(&frame(body.as_bytes())), Err(WireError::Json(_))),
                "{key}"
            );
        }
        let huge = ((MAX_FRAME + 1) as u32).to_be_bytes();
        assert!(matches!(parse(&huge), Err(WireError::TooLong(_))));
        assert!(matches!(parse(&[0xff; 4]), Err(WireError::TooLong(_))));
    }

    #[test]
    fn descriptors_ride_on_the_frame_and_closing_mid_frame_is_an_error() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut tx, mut rx) = (Conn::new(a), Conn::new(b));
        let extra = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = extra.local_addr().unwrap();
        let offer = Message::Offer {
            version: VERSION,
            sockets: 1,
        };
        tx.send(&offer, &[extra.as_raw_fd()]).unwrap();
        let (msg, fds) = rx.recv().unwrap();
        assert_eq!(msg, offer);
        assert_eq!(fds.len(), 1);
        let got = std::net::TcpListener::from(fds.into_iter().next().unwrap());
        assert_eq!(got.local_addr().unwrap(), addr);
        tx.send(&Message::Accepting { pid: 1 }, &[extra.as_raw_fd()])
            .unwrap();
        assert!(matches!(
            rx.recv_plain(),
            Err(WireError::Descriptors { got: 1, want: 0 })
        ));
        // A client frame must bring its socket; one without is refused.
        let client = Message::Client {
            client: Box::new(super::super::moved::tests::sample()),
        };
        tx.send(&client, &[]).unwrap();
        assert!(matches!(
            rx.recv(),
            Err(WireError::Descriptors { got: 0, want: 1 })
        ));
        use std::io::Write;
        tx.stream.write_all(&[0, 0, 0, 9, b'{']).unwrap();
        drop(tx);
        assert!(matches!(rx.recv(), Err(WireError::Closed(true))));
    }
}
