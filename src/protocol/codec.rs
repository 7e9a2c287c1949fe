//! A reusable read buffer that frames messages and checks their length
//! against a cap before it grows, so no allocation is ever sized by a number
//! a peer sent. It does no I/O: the caller reads into [`FrameBuf::spare`]
//! and calls [`FrameBuf::filled`], which keeps every read cancel-safe.

use std::sync::{Arc, Mutex};

use super::{be_u32, Violation};

/// Shed buffers a stash keeps for the next connection that needs one.
const STASH_MAX: usize = 32;

/// Buffers shed by idle connections, ready for the next read; one per
/// pooler, shared by the buffers made [`FrameBuf::with_stash`]. A
/// transaction-pooled client sheds its buffer after every transaction and
/// needs it again microseconds later; allocating and zeroing a new one each
/// time costs more than the relay's own work. The stash is bounded, so
/// thousands of idle clients still hold no buffer each.
#[derive(Debug, Default)]
pub struct BufStash(Mutex<Vec<Vec<u8>>>);

impl BufStash {
    /// A buffer of `len` bytes: a stashed one if there is one of that size.
    /// Its bytes are stale, which is harmless: only what a read writes
    /// becomes readable.
    fn take(&self, len: usize) -> Vec<u8> {
        let reused = self.0.lock().ok().and_then(|mut s| {
            let at = s.iter().rposition(|b| b.len() == len)?;
            Some(s.swap_remove(at))
        });
        reused.unwrap_or_else(|| vec![0; len])
    }

    /// Keeps `buf` for [`BufStash::take`] if the stash has room.
    fn give(&self, buf: Vec<u8>) {
        if let Ok(mut s) = self.0.lock() {
            if s.len() < STASH_MAX {
                s.push(buf);
            }
        }
    }

    /// Buffers held now.
    pub fn len(&self) -> usize {
        self.0.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// Bytes of the buffers held now.
    pub fn bytes(&self) -> usize {
        self.0
            .lock()
            .map(|s| s.iter().map(Vec::len).sum())
            .unwrap_or(0)
    }

    /// True when no buffer is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where a complete message sits in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Message type byte; 0 for an untagged startup packet.
    pub tag: u8,
    /// Offset of the body (after the length word) from the readable start.
    pub body_start: usize,
    /// Body length in bytes.
    pub body_len: usize,
    /// Whole frame length (tag, length word and body).
    pub total: usize,
}

/// A byte buffer with a readable window `[head, tail)`.
///
/// Offsets and sizes are `u32`: every client keeps one, idle or not, and a
/// buffer never grows past its cap, which a message's 32-bit length word
/// bounds anyway.
pub struct FrameBuf {
    data: Vec<u8>,
    head: u32,
    tail: u32,
    max_capacity: u32,
    /// Size to come back to after [`FrameBuf::shed`].
    initial: u32,
    /// Where a shed buffer goes and the next one comes from; None: the allocator.
    stash: Option<Arc<BufStash>>,
}

/// `n` as a buffer size (a larger cap is the same as none).
fn size32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl FrameBuf {
    /// A buffer of `initial` bytes that may grow to `max_capacity` for one frame.
    pub fn new(initial: usize, max_capacity: usize) -> Self {
        let initial = size32(initial);
        FrameBuf {
            data: vec![0; initial as usize],
            head: 0,
            tail: 0,
            max_capacity: size32(max_capacity).max(initial),
            initial,
            stash: None,
        }
    }

    /// Like [`FrameBuf::new`], for a connection that sheds its buffer while
    /// idle: the memory goes to `stash` and comes back from it.
    pub fn with_stash(initial: usize, max_capacity: usize, stash: Arc<BufStash>) -> Self {
        FrameBuf {
            stash: Some(stash),
            ..FrameBuf::new(initial, max_capacity)
        }
    }

    /// Frees the memory of an empty buffer (an idle connection among
    /// thousands); the next read allocates it again at its initial size.
    pub fn shed(&mut self) {
        if self.is_empty() && !self.data.is_empty() {
            let data = std::mem::take(&mut self.data);
            self.head = 0;
            self.tail = 0;
            // One grown for a large message goes back to the allocator.
            let initial = self.initial as usize;
            if let Some(stash) = self.stash.as_ref().filter(|_| data.len() == initial) {
                stash.give(data);
            }
        }
    }

    /// Bytes read but not yet consumed.
    #[inline]
    pub fn readable(&self) -> &[u8] {
        &self.data[self.head as usize..self.tail as usize]
    }

    /// Number of unconsumed bytes.
    #[inline]
    pub fn len(&self) -> usize {
        (self.tail - self.head) as usize
    }

    /// True when nothing is buffered.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// Current capacity.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// Free space to read into; compacts first if the tail reached the end.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.data.is_empty() {
            let initial = self.initial as usize;
            self.data = match &self.stash {
                Some(stash) => stash.take(initial),
                None => vec![0; initial],
            };
        }
        if self.tail as usize == self.data.len() && self.head > 0 {
            self.compact();
        }
        &mut self.data[self.tail as usize..]
    }

    /// Records that `n` bytes were written into [`FrameBuf::spare`]. A read
    /// that filled all the free space means data is streaming: the buffer
    /// doubles (up to its cap) so bulk transfers use few, large reads while an
    /// idle connection keeps a small one.
    #[inline]
    pub fn filled(&mut self, n: usize) {
        let tail = self.tail as usize + n;
        debug_assert!(tail <= self.data.len());
        let was_full = tail == self.data.len();
        // The data never outgrows the cap, a u32.
        self.tail = tail as u32;
        let cap = self.max_capacity as usize;
        if was_full && self.data.len() < cap {
            let grown = (self.data.len() * 2).min(cap);
            self.data.resize(grown, 0);
        }
    }

    /// Drops `n` bytes from the front of the readable window.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len());
        // At most the readable window, itself within the data.
        self.head += n as u32;
        if self.head == self.tail {
            self.head = 0;
            self.tail = 0;
        }
    }

    /// Moves the readable bytes to the start of the buffer.
    fn compact(&mut self) {
        self.data
            .copy_within(self.head as usize..self.tail as usize, 0);
        self.tail -= self.head;
        self.head = 0;
    }

    /// Makes room for a frame of `total` bytes, within the cap.
    pub fn ensure_room_for(&mut self, total: usize) -> Result<(), Violation> {
        let cap = self.max_capacity as usize;
        if total > cap {
            return Err(Violation::new(format!(
                "message of {total} bytes exceeds the limit of {cap} bytes"
            )));
        }
        if self.data.len() - (self.head as usize) < total {
            self.compact();
            if self.data.len() < total {
                self.data.resize(total.next_power_of_two().min(cap), 0);
            }
        }
        Ok(())
    }

    /// Makes room for a frame of `total` bytes that may exceed the usual cap,
    /// up to `hard_cap` (a message the pooler must read whole).
    pub fn ensure_room_up_to(&mut self, total: usize, hard_cap: usize) -> Result<(), Violation> {
        if total > self.max_capacity as usize && total <= hard_cap {
            self.max_capacity = size32(total.next_power_of_two().min(hard_cap));
        }
        self.ensure_room_for(total)
    }

    /// Frames one tagged message (`tag`, length word, body) whose length is at most `max_len`.
    /// `Ok(None)` means more bytes are needed (room for them has been made).
    pub fn tagged_frame(&mut self, max_len: usize) -> Result<Option<Frame>, Violation> {
        let buf = self.readable();
        if buf.len() < 5 {
            return Ok(None);
        }
        let tag = buf[0];
        let len = be_u32(&buf[1..5]) as usize;
        if len < 4 {
            return Err(Violation::new(format!("invalid message length {len}")));
        }
        if len > max_len {
            return Err(Violation::new(format!(
                "invalid message length {len} for message type \"{}\"",
                tag.escape_ascii()
            )));
        }
        let total = len + 1;
        if buf.len() < total {
            self.ensure_room_for(total)?;
            return Ok(None);
        }
        Ok(Some(Frame {
            tag,
            body_start: 5,
            body_len: len - 4,
            total,
        }))
    }

    /// Frames an untagged startup packet whose body (after the length word) is
    /// at most `max_len` bytes, as PostgreSQL counts it.
    pub fn startup_frame(&mut self, max_len: usize) -> Result<Option<Frame>, Violation> {
        let buf = self.readable();
        if buf.len() < 4 {
            return Ok(None);
        }
        let len = be_u32(&buf[0..4]) as usize;
        if len < 8 || len - 4 > max_len {
            return Err(Violation::new("invalid length of startup packet"));
        }
        if buf.len() < len {
            self.ensure_room_for(len)?;
            return Ok(None);
        }
        Ok(Some(Frame {
            tag: 0,
            body_start: 4,
            body_len: len - 4,
            total: len,
        }))
    }

    /// The body of a frame returned by this buffer.
    pub fn body(&self, f: &Frame) -> &[u8] {
        &self.readable()[f.body_start..f.body_start + f.body_len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(b: &mut FrameBuf, bytes: &[u8]) {
        let spare = b.spare();
        spare[..bytes.len()].copy_from_slice(bytes);
        b.filled(bytes.len());
    }

    #[test]
    fn shed_buffer_comes_back_on_the_next_read() {
        let mut b = FrameBuf::new(16, 64);
        b.shed();
        assert_eq!(b.capacity(), 0);
        assert_eq!(b.spare().len(), 16);
        b.spare()[..3].copy_from_slice(b"abc");
        b.filled(3);
        b.shed();
        assert_eq!(b.readable(), b"abc", "a buffer holding data is kept");
    }

    #[test]
    fn a_reused_buffer_shows_nothing_of_its_last_owner() {
        let stash = Arc::new(BufStash::default());
        let mut a = FrameBuf::with_stash(16, 64, stash.clone());
        feed(&mut a, b"secret");
        a.consume(6);
        a.shed();
        assert_eq!(stash.len(), 1, "the shed buffer went to the stash");
        let mut b = FrameBuf::with_stash(16, 64, stash.clone());
        b.shed();
        assert_eq!(stash.len(), 2);
        assert!(b.spare().len() == 16 && b.readable().is_empty());
        assert_eq!(stash.len(), 1, "the next read takes one back");
        feed(&mut b, b"x");
        assert_eq!(b.readable(), b"x");
        assert_eq!(b.capacity(), 16);
    }

    #[test]
    fn stashes_are_owned_not_global() {
        let (one, two) = (Arc::new(BufStash::default()), Arc::new(BufStash::default()));
        let mut a = FrameBuf::with_stash(16, 64, one.clone());
        a.spare();
        a.shed();
        let mut b = FrameBuf::with_stash(16, 64, two.clone());
        b.spare();
        assert_eq!((one.len(), two.len()), (1, 0));
        let mut plain = FrameBuf::new(16, 64);
        plain.spare();
        plain.shed();
        assert_eq!(
            one.len(),
            1,
            "a buffer without a stash goes to the allocator"
        );
    }

    #[test]
    fn frames_a_message_split_across_reads() {
        let mut b = FrameBuf::new(16, 64);
        feed(&mut b, b"Q\0\0");
        assert_eq!(b.tagged_frame(100).unwrap(), None);
        feed(&mut b, b"\0\x08ab");
        assert_eq!(b.tagged_frame(100).unwrap(), None);
        feed(&mut b, b"c\0");
        let f = b.tagged_frame(100).unwrap().unwrap();
        assert_eq!(f.tag, b'Q');
        assert_eq!(b.body(&f), b"abc\0");
        b.consume(f.total);
        assert!(b.is_empty());
    }

    #[test]
    fn rejects_lengths_before_allocating() {
        let mut b = FrameBuf::new(16, 64);
        feed(&mut b, b"Q\xff\xff\xff\xff");
        assert!(b.tagged_frame(usize::MAX).is_err());
        assert_eq!(b.capacity(), 16);
        let mut b = FrameBuf::new(16, 64);
        feed(&mut b, b"Q\0\0\0\x03");
        assert!(b.tagged_frame(100).is_err());
        let mut b = FrameBuf::new(16, 64);
        feed(&mut b, b"p\0\0\x10\0");
        assert!(b.tagged_frame(1000).is_err(), "over max_len");
    }

    #[test]
    fn grows_when_reads_fill_it_and_stops_at_the_cap() {
        let mut b = FrameBuf::new(8, 32);
        feed(&mut b, &[0u8; 8]);
        assert_eq!(b.capacity(), 16);
        b.consume(8);
        feed(&mut b, &[0u8; 16]);
        assert_eq!(b.capacity(), 32);
        b.consume(16);
        feed(&mut b, &[0u8; 32]);
        assert_eq!(b.capacity(), 32);
    }

    #[test]
    fn grows_within_cap_for_a_large_frame() {
        let mut b = FrameBuf::new(8, 64);
        feed(&mut b, b"d\0\0\0\x28");
        assert_eq!(b.tagged_frame(100).unwrap(), None);
        assert!(b.capacity() >= 41);
    }

    #[test]
    fn a_cap_past_32_bits_is_no_cap_and_refuses_nothing_it_could_hold() {
        let mut b = FrameBuf::new(8, usize::MAX);
        assert!(b.ensure_room_up_to(1 << 20, usize::MAX).is_ok());
        assert!(b.capacity() >= 1 << 20);
        let past = u32::MAX as usize + 1;
        let e = b.ensure_room_for(past).expect_err("past 4 GiB");
        assert!(e.to_string().contains(&past.to_string()), "{e}");
        // A window that moved keeps its bytes through a compaction.
        feed(&mut b, b"abcdef");
        b.consume(2);
        assert!(b.ensure_room_for(b.capacity()).is_ok());
        assert_eq!(b.readable(), b"cdef");
    }

    #[test]
    fn startup_lengths_follow_postgres() {
        for bad in [0u32, 4, 7, 10_005, 0xffff_ffff] {
            let mut b = FrameBuf::new(16, 16);
            feed(&mut b, &bad.to_be_bytes());
            assert!(b.startup_frame(10_000).is_err(), "length {bad}");
        }
        let mut b = FrameBuf::new(16, 10_000);
        feed(&mut b, &8u32.to_be_bytes());
        feed(&mut b, &super::super::SSL_REQUEST_CODE.to_be_bytes());
        let f = b.startup_frame(10_000).unwrap().unwrap();
        assert_eq!(f.body_len, 4);
    }
}
