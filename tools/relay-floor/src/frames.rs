//! `--scan`: the least protocol work a pooler's relay does, run inline on
//! each received chunk: walk the message headers (tag and length, split
//! anywhere across chunks), count messages, and keep the transaction
//! status of the last ReadyForQuery. It tells what framing costs a relay
//! whose loop is io_uring's, next to the relay that parses nothing.
//!
//! The client's first message is the untagged startup packet. An
//! SSLRequest or GSSENCRequest is not expected: over TCP run clients with
//! `sslmode=disable` (Unix sockets never send one).

/// One direction's framing state.
#[derive(Default)]
pub struct Frames {
    /// Header bytes seen of the message being framed (tag and length).
    head: [u8; 5],
    have: usize,
    /// Body bytes still to skip.
    rest: u32,
    /// The next body byte is a ReadyForQuery's status.
    want_status: bool,
    /// Messages framed.
    pub messages: u64,
    /// The last ReadyForQuery's status (`I`, `T` or `E`).
    pub status: u8,
    /// The client's first message has no tag.
    untagged_first: bool,
}

impl Frames {
    /// Framing for the client's direction (startup packet first).
    pub fn client() -> Frames {
        Frames {
            untagged_first: true,
            ..Frames::default()
        }
    }

    /// Walks `data`, the next bytes of the stream; false on a length no
    /// message can have.
    pub fn scan(&mut self, mut data: &[u8]) -> bool {
        while !data.is_empty() {
            if self.rest > 0 {
                if self.want_status {
                    self.status = data[0];
                    self.want_status = false;
                }
                let take = (self.rest as usize).min(data.len());
                self.rest -= take as u32;
                data = &data[take..];
                continue;
            }
            let head_len = if self.untagged_first { 4 } else { 5 };
            let take = (head_len - self.have).min(data.len());
            self.head[self.have..self.have + take].copy_from_slice(&data[..take]);
            self.have += take;
            data = &data[take..];
            if self.have < head_len {
                break;
            }
            let (tag, len) = if self.untagged_first {
                self.untagged_first = false;
                (
                    0,
                    u32::from_be_bytes([self.head[0], self.head[1], self.head[2], self.head[3]]),
                )
            } else {
                (
                    self.head[0],
                    u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]]),
                )
            };
            if len < 4 {
                return false;
            }
            self.have = 0;
            self.messages += 1;
            self.want_status = tag == b'Z';
            self.rest = len - 4;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![tag];
        m.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn frames_split_anywhere() {
        let mut stream = msg(b'T', b"rowdesc");
        stream.extend(msg(b'D', b"datarow"));
        stream.extend(msg(b'C', b"SELECT 1\0"));
        stream.extend(msg(b'Z', b"T"));
        for cut in 0..=stream.len() {
            let mut f = Frames::default();
            assert!(f.scan(&stream[..cut]));
            assert!(f.scan(&stream[cut..]));
            assert_eq!((f.messages, f.status), (4, b'T'), "cut at {cut}");
        }
    }

    #[test]
    fn the_startup_packet_is_untagged_and_a_short_length_is_refused() {
        let mut f = Frames::client();
        let mut s = 12u32.to_be_bytes().to_vec();
        s.extend_from_slice(&[0, 3, 0, 0, b'u', 0, b'x', 0]);
        s.extend(msg(b'Q', b"select 1\0"));
        assert!(f.scan(&s));
        assert_eq!(f.messages, 2);
        assert!(!Frames::default().scan(&[b'Q', 0, 0, 0, 3]));
    }
}
