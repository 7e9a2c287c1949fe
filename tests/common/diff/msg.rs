//! Frontend messages of the differential harness: what a generated step
//! sends, how it is encoded on the wire, how it is shown in a failure
//! report, and a checker that every encoded message is well-formed.
//!
//! SQL text, parameters and COPY data may contain the placeholder `{T}`,
//! replaced at encoding time by the target's tag (see
//! [`super::norm::TAG_LEN`]): each target has its own tables and channels,
//! and every tag has the same length, so a message has the same length on
//! every target and a cut point falls at the same byte.

use std::fmt::Write as _;

/// The per-target placeholder.
pub const PLACEHOLDER: &str = "{T}";

/// Text that may be several MiB: either a plain string or a long run of one
/// ASCII byte between a prefix and a suffix (kept short in the sequence and
/// in reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    S(String),
    Big {
        pre: String,
        ch: u8,
        n: usize,
        post: String,
    },
}

impl Text {
    pub fn s(s: impl Into<String>) -> Text {
        Text::S(s.into())
    }

    pub fn bytes(&self, tag: &str) -> Vec<u8> {
        match self {
            Text::S(s) => s.replace(PLACEHOLDER, tag).into_bytes(),
            Text::Big { pre, ch, n, post } => {
                let pre = pre.replace(PLACEHOLDER, tag);
                let post = post.replace(PLACEHOLDER, tag);
                let mut v = Vec::with_capacity(pre.len() + n + post.len());
                v.extend_from_slice(pre.as_bytes());
                v.resize(pre.len() + n, *ch);
                v.extend_from_slice(post.as_bytes());
                v
            }
        }
    }

    pub fn show(&self) -> String {
        match self {
            Text::S(s) if s.len() > 160 => format!("{:?}…({} bytes)", &s[..120], s.len()),
            Text::S(s) => format!("{s:?}"),
            Text::Big { pre, ch, n, post } => {
                format!("{pre:?} + {n}×'{}' + {post:?}", *ch as char)
            }
        }
    }

    pub fn len_hint(&self) -> usize {
        match self {
            Text::S(s) => s.len(),
            Text::Big { pre, n, post, .. } => pre.len() + n + post.len(),
        }
    }
}

/// A Bind parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Param {
    Null,
    /// Text format.
    Text(Text),
    /// Binary format int4.
    Int4(i32),
}

/// One frontend message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fe {
    Query(Text),
    Parse {
        name: String,
        sql: Text,
        types: Vec<u32>,
    },
    Bind {
        portal: String,
        stmt: String,
        params: Vec<Param>,
        /// All result columns in binary format (else text).
        binary_results: bool,
    },
    /// Describe a portal (`P`) or a statement (`S`).
    Describe {
        portal: bool,
        name: String,
    },
    Execute {
        portal: String,
        max_rows: u32,
    },
    Close {
        portal: bool,
        name: String,
    },
    Sync,
    Flush,
    CopyData(Text),
    CopyDone,
    CopyFail(String),
    Terminate,
}

fn cstr(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(s);
    out.push(0);
}

fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(body.len() + 5);
    m.push(tag);
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

impl Fe {
    pub fn query(sql: impl Into<String>) -> Fe {
        Fe::Query(Text::S(sql.into()))
    }

    pub fn parse(name: &str, sql: impl Into<String>) -> Fe {
        Fe::Parse {
            name: name.into(),
            sql: Text::S(sql.into()),
            types: vec![],
        }
    }

    pub fn bind(portal: &str, stmt: &str, params: Vec<Param>) -> Fe {
        Fe::Bind {
            portal: portal.into(),
            stmt: stmt.into(),
            params,
            binary_results: false,
        }
    }

    pub fn execute(portal: &str, max_rows: u32) -> Fe {
        Fe::Execute {
            portal: portal.into(),
            max_rows,
        }
    }

    pub fn describe(portal: bool, name: &str) -> Fe {
        Fe::Describe {
            portal,
            name: name.into(),
        }
    }

    pub fn close(portal: bool, name: &str) -> Fe {
        Fe::Close {
            portal,
            name: name.into(),
        }
    }

    pub fn encode(&self, tag: &str) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Fe::Query(sql) => {
                cstr(&mut b, &sql.bytes(tag));
                frame(b'Q', &b)
            }
            Fe::Parse { name, sql, types } => {
                cstr(&mut b, name.as_bytes());
                cstr(&mut b, &sql.bytes(tag));
                b.extend_from_slice(&(types.len() as u16).to_be_bytes());
                for t in types {
                    b.extend_from_slice(&t.to_be_bytes());
                }
                frame(b'P', &b)
            }
            Fe::Bind {
                portal,
                stmt,
                params,
                binary_results,
            } => {
                cstr(&mut b, portal.as_bytes());
                cstr(&mut b, stmt.as_bytes());
                if params.iter().any(|p| matches!(p, Param::Int4(_))) {
                    b.extend_from_slice(&(params.len() as u16).to_be_bytes());
                    for p in params {
                        let f: u16 = matches!(p, Param::Int4(_)).into();
                        b.extend_from_slice(&f.to_be_bytes());
                    }
                } else {
                    b.extend_from_slice(&0u16.to_be_bytes());
                }
                b.extend_from_slice(&(params.len() as u16).to_be_bytes());
                for p in params {
                    match p {
                        Param::Null => b.extend_from_slice(&(-1i32).to_be_bytes()),
                        Param::Text(t) => {
                            let v = t.bytes(tag);
                            b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                            b.extend_from_slice(&v);
                        }
                        Param::Int4(i) => {
                            b.extend_from_slice(&4i32.to_be_bytes());
                            b.extend_from_slice(&i.to_be_bytes());
                        }
                    }
                }
                if *binary_results {
                    b.extend_from_slice(&1u16.to_be_bytes());
                    b.extend_from_slice(&1u16.to_be_bytes());
                } else {
                    b.extend_from_slice(&0u16.to_be_bytes());
                }
                frame(b'B', &b)
            }
            Fe::Describe { portal, name } => {
                b.push(if *portal { b'P' } else { b'S' });
                cstr(&mut b, name.as_bytes());
                frame(b'D', &b)
            }
            Fe::Execute { portal, max_rows } => {
                cstr(&mut b, portal.as_bytes());
                b.extend_from_slice(&max_rows.to_be_bytes());
                frame(b'E', &b)
            }
            Fe::Close { portal, name } => {
                b.push(if *portal { b'P' } else { b'S' });
                cstr(&mut b, name.as_bytes());
                frame(b'C', &b)
            }
            Fe::Sync => frame(b'S', &[]),
            Fe::Flush => frame(b'H', &[]),
            Fe::CopyData(t) => frame(b'd', &t.bytes(tag)),
            Fe::CopyDone => frame(b'c', &[]),
            Fe::CopyFail(m) => {
                cstr(&mut b, m.as_bytes());
                frame(b'f', &b)
            }
            Fe::Terminate => frame(b'X', &[]),
        }
    }

    /// Human-readable, one line, long texts abbreviated.
    pub fn show(&self) -> String {
        match self {
            Fe::Query(sql) => format!("Query {}", sql.show()),
            Fe::Parse { name, sql, types } => {
                let mut s = format!("Parse {name:?} {}", sql.show());
                if !types.is_empty() {
                    let _ = write!(s, " types={types:?}");
                }
                s
            }
            Fe::Bind {
                portal,
                stmt,
                params,
                binary_results,
            } => {
                let ps: Vec<String> = params
                    .iter()
                    .map(|p| match p {
                        Param::Null => "NULL".into(),
                        Param::Text(t) => t.show(),
                        Param::Int4(i) => format!("int4 {i} (binary)"),
                    })
                    .collect();
                format!(
                    "Bind portal={portal:?} stmt={stmt:?} [{}]{}",
                    ps.join(", "),
                    if *binary_results {
                        " results=binary"
                    } else {
                        ""
                    }
                )
            }
            Fe::Describe { portal, name } => {
                format!("Describe {} {name:?}", if *portal { 'P' } else { 'S' })
            }
            Fe::Execute { portal, max_rows } => format!("Execute {portal:?} max_rows={max_rows}"),
            Fe::Close { portal, name } => {
                format!("Close {} {name:?}", if *portal { 'P' } else { 'S' })
            }
            Fe::Sync => "Sync".into(),
            Fe::Flush => "Flush".into(),
            Fe::CopyData(t) => format!("CopyData {}", t.show()),
            Fe::CopyDone => "CopyDone".into(),
            Fe::CopyFail(m) => format!("CopyFail {m:?}"),
            Fe::Terminate => "Terminate".into(),
        }
    }
}

/// Encodes messages back to back.
pub fn encode_all(msgs: &[Fe], tag: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for m in msgs {
        out.extend(m.encode(tag));
    }
    out
}

/// A byte cursor for [`check_frontend`].
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Cur<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.pos + n > self.b.len() {
            return Err(format!("needs {n} bytes at offset {}", self.pos));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, String> {
        Ok(i16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn i32(&mut self) -> Result<i32, String> {
        Ok(i32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn cstr(&mut self) -> Result<(), String> {
        let rest = &self.b[self.pos..];
        let end = rest
            .iter()
            .position(|&c| c == 0)
            .ok_or("unterminated string")?;
        self.pos += end + 1;
        Ok(())
    }
    fn done(&self) -> Result<(), String> {
        if self.pos == self.b.len() {
            Ok(())
        } else {
            Err(format!(
                "{} trailing byte(s) after the fields",
                self.b.len() - self.pos
            ))
        }
    }
}

/// Splits a frontend byte stream into messages and checks each: its length
/// word matches, and its body has exactly the fields its type defines.
/// Returns the message types.
pub fn check_frontend(bytes: &[u8]) -> Result<Vec<u8>, String> {
    let mut tags = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if bytes.len() - pos < 5 {
            return Err(format!("truncated header at {pos}"));
        }
        let tag = bytes[pos];
        let len = u32::from_be_bytes(bytes[pos + 1..pos + 5].try_into().unwrap()) as usize;
        if len < 4 || pos + 1 + len > bytes.len() {
            return Err(format!(
                "message {:?} at {pos}: length {len} does not fit the {} bytes left",
                tag as char,
                bytes.len() - pos - 1
            ));
        }
        let body = &bytes[pos + 5..pos + 1 + len];
        let mut c = Cur { b: body, pos: 0 };
        let checked: Result<(), String> = (|| {
            match tag {
                b'Q' | b'f' => c.cstr()?,
                b'P' => {
                    c.cstr()?;
                    c.cstr()?;
                    let n = c.i16()?;
                    if n < 0 {
                        return Err("negative type count".into());
                    }
                    c.take(4 * n as usize)?;
                }
                b'B' => {
                    c.cstr()?;
                    c.cstr()?;
                    let nf = c.i16()?;
                    for _ in 0..nf {
                        let f = c.i16()?;
                        if f != 0 && f != 1 {
                            return Err(format!("format code {f}"));
                        }
                    }
                    let np = c.i16()?;
                    if !(nf == 0 || nf == 1 || nf == np) {
                        return Err(format!("{nf} format codes for {np} parameters"));
                    }
                    for _ in 0..np {
                        let l = c.i32()?;
                        if l < -1 {
                            return Err(format!("parameter length {l}"));
                        }
                        if l > 0 {
                            c.take(l as usize)?;
                        }
                    }
                    let nr = c.i16()?;
                    for _ in 0..nr {
                        c.i16()?;
                    }
                }
                b'D' | b'C' => {
                    let k = c.take(1)?[0];
                    if k != b'S' && k != b'P' {
                        return Err(format!("kind {:?}", k as char));
                    }
                    c.cstr()?;
                }
                b'E' => {
                    c.cstr()?;
                    if c.i32()? < 0 {
                        return Err("negative row limit".into());
                    }
                }
                b'S' | b'H' | b'c' | b'X' => {}
                b'd' => {
                    c.take(body.len())?;
                }
                other => return Err(format!("unknown type {:?}", other as char)),
            }
            c.done()
        })();
        checked.map_err(|e| format!("message {:?} at {pos}: {e}", tag as char))?;
        tags.push(tag);
        pos += 1 + len;
    }
    Ok(tags)
}
