//! The normaliser: renders each backend message as one line of text that
//! is equal for equal behaviour, after the documented differences below
//! have been taken out. Everything not listed is compared exactly (every
//! field of every message, in order; long values by length and hash).
//!
//! # Documented differences (the complete list)
//!
//! 1. **BackendKeyData**: process id and secret key are shown as `<pid>`
//!    and `<key>`. pgharbor hands every client a key of its own (README,
//!    "its BackendKeyData is pgharbor's own"); a cancel with it must still
//!    reach the client's query, which the cancel steps check.
//! 2. **NotificationResponse sender pid** is shown as `<pid>`: a direct
//!    client sees its backend's pid, a pooled one whatever backend it
//!    holds (the channel and payload are compared).
//! 3. **The target's tag** (see [`TAG_LEN`]) in any string (table,
//!    constraint and channel names, application_name, error texts) is
//!    shown as `{T}`: each target gets its own tables so that their
//!    contents can be compared; this is the harness's doing, not the
//!    pooler's.
//! 4. **RowDescription table OID** of the target's own tables `a_{T}` and
//!    `b_{T}` is shown as `a_{T}` / `b_{T}` (the same tables under other
//!    OIDs; column numbers, type OIDs, sizes, modifiers and formats are
//!    compared). Any other table OID is shown as a number.
//! 5. **Cancel races** (steps marked `cancel`): only the outcome of the
//!    step (cancelled with 57014, or completed) and its final
//!    ReadyForQuery are compared, not when the cancel landed (done in
//!    [`super::run`]).
//! 6. **Errors pgharbor answers itself** where PostgreSQL would answer the
//!    same (README: a Parse of a statement name in use, under transaction
//!    and statement pooling, gets `42P05` from pgharbor) carry no source
//!    fields `F`/`L`/`R`; an error without any of them equals one with
//!    them when every other field is equal (done in [`super::run`]). When
//!    both sides have source fields, they are compared like the rest.
//!
//! Not normalised on purpose: ParameterStatus (names, values and order,
//! at login and later), every other error and notice field, CommandComplete tags, statement and
//! portal names in errors (pgharbor's own `PGHARBOR_<n>` names must never
//! show).

use std::fmt::Write as _;

/// Length of every target's tag: 16 hex digits of the seed, a letter for
/// the target (`d` PostgreSQL, `p` pgharbor; `e` and `f` PostgreSQL twice
/// in the self-check) and the mode's three letters, e.g. `00000000d1ff0003ptxn`.
/// Equal lengths keep messages equally long on every target.
pub const TAG_LEN: usize = 20;

pub fn tag(seed: u64, letter: char, mode_short: &str) -> String {
    let t = format!("{seed:016x}{letter}{mode_short}");
    assert_eq!(t.len(), TAG_LEN, "tag {t}");
    t
}

/// What the normaliser needs to know about one target.
#[derive(Debug, Clone)]
pub struct Norm {
    pub tag: String,
    /// (table OID, what to show instead).
    pub tables: Vec<(u32, String)>,
}

/// Values longer than this are shown by length and hash.
const SHOW_MAX: usize = 160;

fn fnv64(b: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in b {
        h ^= x as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// `hay` with every occurrence of `needle` replaced by `with`.
pub fn replace_bytes(hay: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    if needle.is_empty() || hay.len() < needle.len() {
        return hay.to_vec();
    }
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    let first = needle[0];
    while i < hay.len() {
        if hay[i] == first && hay[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    fn cstr(&mut self) -> Option<&'a [u8]> {
        let rest = self.b.get(self.pos..)?;
        let end = rest.iter().position(|&c| c == 0)?;
        self.pos += end + 1;
        Some(&rest[..end])
    }
    fn end(&self) -> Option<()> {
        (self.pos == self.b.len()).then_some(())
    }
}

impl Norm {
    /// A value: tag replaced, then shown quoted when short text, else by
    /// length and hash (with its start, for the reader).
    pub fn val(&self, raw: &[u8]) -> String {
        let b = replace_bytes(raw, self.tag.as_bytes(), b"{T}");
        match std::str::from_utf8(&b) {
            Ok(s) if b.len() <= SHOW_MAX => format!("{s:?}"),
            Ok(s) => {
                let head: String = s.chars().take(40).collect();
                format!("<{} bytes fnv={:016x} {head:?}…>", b.len(), fnv64(&b))
            }
            Err(_) if b.len() <= 64 => {
                let mut h = String::from("0x");
                for x in &b {
                    let _ = write!(h, "{x:02x}");
                }
                h
            }
            Err(_) => format!("<{} binary bytes fnv={:016x}>", b.len(), fnv64(&b)),
        }
    }

    fn table(&self, oid: u32) -> String {
        self.tables
            .iter()
            .find(|(o, _)| *o == oid)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| oid.to_string())
    }

    /// One backend message as a line.
    pub fn render(&self, tag: u8, body: &[u8]) -> String {
        self.try_render(tag, body)
            .unwrap_or_else(|| format!("malformed {:?} message: {}", tag as char, self.val(body)))
    }

    fn try_render(&self, tag: u8, body: &[u8]) -> Option<String> {
        let mut c = Cur { b: body, pos: 0 };
        let s = match tag {
            b'R' => {
                let code = c.i32()?;
                format!(
                    "Authentication code={code} {}",
                    self.val(c.take(body.len() - 4)?)
                )
            }
            b'S' => {
                let k = c.cstr()?;
                let v = c.cstr()?;
                c.end()?;
                format!("ParameterStatus {}={}", self.val(k), self.val(v))
            }
            b'K' => {
                c.take(8)?;
                c.end()?;
                // Documented difference 1.
                "BackendKeyData <pid> <key>".to_string()
            }
            b'Z' => {
                let st = c.u8()?;
                c.end()?;
                format!("ReadyForQuery {}", st as char)
            }
            b'T' => {
                let n = c.i16()?;
                let mut cols = Vec::new();
                for _ in 0..n {
                    let name = c.cstr()?;
                    let table = c.i32()? as u32;
                    let attnum = c.i16()?;
                    let typ = c.i32()? as u32;
                    let size = c.i16()?;
                    let typmod = c.i32()?;
                    let fmt = c.i16()?;
                    cols.push(format!(
                        "{} table={} col={attnum} type={typ} size={size} mod={typmod} fmt={fmt}",
                        self.val(name),
                        // Documented difference 4.
                        self.table(table)
                    ));
                }
                c.end()?;
                format!("RowDescription [{}]", cols.join("; "))
            }
            b'D' => {
                let n = c.i16()?;
                let mut vals = Vec::new();
                for _ in 0..n {
                    let len = c.i32()?;
                    if len < 0 {
                        vals.push("NULL".to_string());
                    } else {
                        vals.push(self.val(c.take(len as usize)?));
                    }
                }
                c.end()?;
                format!("DataRow [{}]", vals.join(", "))
            }
            b'C' => {
                let t = c.cstr()?;
                c.end()?;
                format!("CommandComplete {}", self.val(t))
            }
            b'E' | b'N' => {
                let mut fields = Vec::new();
                loop {
                    let k = c.u8()?;
                    if k == 0 {
                        break;
                    }
                    let v = c.cstr()?;
                    fields.push(format!("{}={}", k as char, self.val(v)));
                }
                c.end()?;
                format!(
                    "{} {}",
                    if tag == b'E' {
                        "ErrorResponse"
                    } else {
                        "NoticeResponse"
                    },
                    fields.join(" ")
                )
            }
            b'A' => {
                c.i32()?;
                let ch = c.cstr()?;
                let payload = c.cstr()?;
                c.end()?;
                // Documented difference 2.
                format!(
                    "NotificationResponse <pid> channel={} payload={}",
                    self.val(ch),
                    self.val(payload)
                )
            }
            b't' => {
                let n = c.i16()?;
                let mut oids = Vec::new();
                for _ in 0..n {
                    oids.push((c.i32()? as u32).to_string());
                }
                c.end()?;
                format!("ParameterDescription [{}]", oids.join(", "))
            }
            b'G' | b'H' | b'W' => {
                let f = c.u8()?;
                let n = c.i16()?;
                let mut fs = Vec::new();
                for _ in 0..n {
                    fs.push(c.i16()?.to_string());
                }
                c.end()?;
                let name = match tag {
                    b'G' => "CopyInResponse",
                    b'H' => "CopyOutResponse",
                    _ => "CopyBothResponse",
                };
                format!("{name} format={f} columns=[{}]", fs.join(","))
            }
            b'd' => format!("CopyData {}", self.val(body)),
            b'v' => {
                let minor = c.i32()?;
                let n = c.i32()?;
                let mut opts = Vec::new();
                for _ in 0..n {
                    opts.push(self.val(c.cstr()?));
                }
                c.end()?;
                format!("NegotiateProtocolVersion {minor} [{}]", opts.join(", "))
            }
            b'1' | b'2' | b'3' | b'n' | b's' | b'I' | b'c' => {
                c.end()?;
                match tag {
                    b'1' => "ParseComplete",
                    b'2' => "BindComplete",
                    b'3' => "CloseComplete",
                    b'n' => "NoData",
                    b's' => "PortalSuspended",
                    b'I' => "EmptyQueryResponse",
                    _ => "CopyDone",
                }
                .to_string()
            }
            other => format!("unknown message {:?} {}", other as char, self.val(body)),
        };
        Some(s)
    }
}
