//! Handing idle transaction-pooling clients from the old process to the
//! new one, over the control connection that stays open while the old
//! process drains: each client is one [`Message::Client`] frame with its
//! socket attached.
//!
//! The old side is the [`Outbox`] its clients' sessions ask; the new side
//! is [`receive`], which reads the frames and passes each client on. A
//! socket sent is the new process's: the old session ends without a word
//! to the client. One that cannot be sent stays, and drains as before.

use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use tokio::sync::oneshot;

use super::moved::MovedClient;
use super::wire::{encode, Conn, Message, WireError, MAX_FRAME};

/// Why one client was not handed over (it stays on this process).
#[derive(Debug, thiserror::Error)]
pub enum HandoffError {
    /// No takeover, or the connection to the new process failed.
    #[error("no new process to hand clients to")]
    Closed,
    /// Its state does not fit in one control frame.
    #[error("the client's state is {0} bytes, more than a control frame holds")]
    TooLarge(usize),
    /// Its socket could not be duplicated.
    #[error("cannot duplicate the client's socket: {0}")]
    Dup(std::io::Error),
    /// The control connection failed on this client.
    #[error("{0}")]
    Wire(#[from] WireError),
}

/// One client on its way: the frame, its socket, and where to say how it went.
struct Parcel {
    frame: Vec<u8>,
    fd: OwnedFd,
    sent: oneshot::Sender<Result<(), WireError>>,
}

/// The old process's way to the new one, once a takeover is confirmed.
#[derive(Default)]
pub struct Outbox {
    /// Set once the connection failed: sessions stop trying.
    broken: AtomicBool,
    sender: OnceLock<std::sync::mpsc::Sender<Parcel>>,
}

impl Outbox {
    /// Starts handing clients over on `conn` (a clone of the control
    /// connection), from a thread of its own: the writes block.
    pub fn open(&self, mut conn: Conn) -> std::io::Result<()> {
        let (tx, rx) = std::sync::mpsc::channel::<Parcel>();
        std::thread::Builder::new()
            .name("takeover-clients".into())
            .spawn(move || {
                for p in rx {
                    let r = conn.send_frame(&p.frame, &[p.fd.as_raw_fd()]);
                    let failed = r.is_err();
                    let _ = p.sent.send(r);
                    if failed {
                        return;
                    }
                }
            })?;
        let _ = self.sender.set(tx);
        Ok(())
    }

    /// Whether sessions may hand their clients over now.
    pub fn is_open(&self) -> bool {
        self.sender.get().is_some() && !self.broken.load(Ordering::Relaxed)
    }

    /// Sends `client` with its socket `fd`; once this returns Ok the
    /// socket is the new process's, and the caller must neither read nor
    /// write it again.
    pub async fn send(&self, client: MovedClient, fd: BorrowedFd<'_>) -> Result<(), HandoffError> {
        let sender = self.sender.get().filter(|_| self.is_open());
        let sender = sender.ok_or(HandoffError::Closed)?;
        let frame = encode(&Message::Client {
            client: Box::new(client),
        });
        if frame.len() > MAX_FRAME {
            return Err(HandoffError::TooLarge(frame.len()));
        }
        let fd = fd.try_clone_to_owned().map_err(HandoffError::Dup)?;
        let (sent, result) = oneshot::channel();
        sender
            .send(Parcel { frame, fd, sent })
            .map_err(|_| HandoffError::Closed)?;
        match result.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                self.broken.store(true, Ordering::Relaxed);
                Err(e.into())
            }
            Err(_) => {
                self.broken.store(true, Ordering::Relaxed);
                Err(HandoffError::Closed)
            }
        }
    }
}

/// The new process's side: reads handed-over clients from `conn` (a
/// clone of the control connection) on a thread of its own until the old
/// process hangs up, and passes each on to `deliver`. A malformed frame
/// ends the reading (the old process's next send fails, so its remaining
/// clients drain there); nothing else changes.
pub fn receive(
    mut conn: Conn,
    deliver: impl Fn(MovedClient, OwnedFd) + Send + 'static,
) -> std::io::Result<()> {
    conn.wait_indefinitely().map_err(std::io::Error::other)?;
    std::thread::Builder::new()
        .name("takeover-arrivals".into())
        .spawn(move || loop {
            match conn.recv() {
                Ok((Message::Client { client }, fds)) => match fds.into_iter().next() {
                    Some(fd) => deliver(*client, fd),
                    None => return refuse(&conn, "a client frame without its socket"),
                },
                Ok((other, _)) => {
                    return refuse(&conn, &format!("unexpected message {other:?}"));
                }
                Err(WireError::Closed(false)) => {
                    tracing::debug!("takeover: the old process closed the control connection");
                    return;
                }
                Err(e) => return refuse(&conn, &e.to_string()),
            }
        })?;
    Ok(())
}

fn refuse(conn: &Conn, why: &str) {
    tracing::warn!(
        reason = why,
        "takeover: malformed hand-over from the old process; taking no more clients from it"
    );
    conn.refuse_more();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use std::sync::mpsc;

    fn arrivals(b: UnixStream) -> mpsc::Receiver<(MovedClient, OwnedFd)> {
        let (tx, rx) = mpsc::channel();
        let deliver = move |c, fd| {
            let _ = tx.send((c, fd));
        };
        receive(Conn::new(b), deliver).unwrap();
        rx
    }

    #[tokio::test]
    async fn clients_arrive_with_their_own_sockets_in_order() {
        let (a, b) = UnixStream::pair().unwrap();
        let rx = arrivals(b);
        let outbox = Outbox::default();
        assert!(!outbox.is_open());
        outbox.open(Conn::new(a)).unwrap();
        let mut sent = Vec::new();
        for i in 0..5u64 {
            let (mine, theirs) = UnixStream::pair().unwrap();
            let mut c = super::super::moved::tests::sample();
            c.old_id = i;
            let fd = std::os::fd::AsFd::as_fd(&mine);
            outbox.send(c, fd).await.unwrap();
            sent.push(theirs);
        }
        for (i, theirs) in sent.iter_mut().enumerate() {
            let (c, fd) = rx.recv().unwrap();
            assert_eq!(c.old_id, i as u64);
            let mut got = UnixStream::from(fd);
            theirs.write_all(&[i as u8]).unwrap();
            let mut byte = [0u8];
            std::io::Read::read_exact(&mut got, &mut byte).unwrap();
            assert_eq!(byte[0], i as u8, "client {i} got another's socket");
        }
    }

    #[test]
    fn the_reader_takes_over_frames_read_ahead_with_the_last_answer() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut tx, mut rx) = (Conn::new(a), Conn::new(b));
        let (mine, _theirs) = UnixStream::pair().unwrap();
        let client = Message::Client {
            client: Box::new(super::super::moved::tests::sample()),
        };
        tx.send(&Message::Draining { pid: 1 }, &[]).unwrap();
        tx.send(&client, &[mine.as_raw_fd()]).unwrap();
        // Both frames are queued before the first read: it may take both.
        assert_eq!(rx.recv_plain().unwrap(), Message::Draining { pid: 1 });
        let mut reader = rx.reader().unwrap();
        let (got, fds) = reader.recv().unwrap();
        assert_eq!((got, fds.len()), (client, 1));
    }

    #[tokio::test]
    async fn a_malformed_frame_stops_the_arrivals_and_the_sender_learns() {
        let (a, b) = UnixStream::pair().unwrap();
        let rx = arrivals(b);
        let mut raw = a.try_clone().unwrap();
        raw.write_all(&[0, 0, 0, 2, b'{', b'}']).unwrap();
        assert!(rx.recv().is_err(), "nothing is delivered");
        let outbox = Outbox::default();
        outbox.open(Conn::new(a)).unwrap();
        let (mine, _theirs) = UnixStream::pair().unwrap();
        let fd = std::os::fd::AsFd::as_fd(&mine);
        let c = super::super::moved::tests::sample();
        assert!(outbox.send(c.clone(), fd).await.is_err());
        assert!(!outbox.is_open());
        assert!(matches!(
            outbox.send(c, fd).await,
            Err(HandoffError::Closed)
        ));
    }
}
