//! The in-memory transport between client and server: two pipes.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::rc::Rc;

/// One direction of the in-memory link.
pub type Pipe = Rc<RefCell<VecDeque<u8>>>;

/// A byte stream over two pipes; reads of an empty pipe say WouldBlock so
/// OpenSSL returns WANT_READ and we can let the other side run.
#[derive(Debug)]
pub struct Duplex {
    pub rx: Pipe,
    pub tx: Pipe,
}

impl Read for Duplex {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rx = self.rx.borrow_mut();
        if rx.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let n = rx.read(buf)?;
        Ok(n)
    }
}

impl Write for Duplex {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.tx.borrow_mut().extend(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
