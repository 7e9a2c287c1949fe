//! Result sets as the console sends them: RowDescription, DataRows and
//! CommandComplete, all in text format. No I/O.

use bytes::{BufMut, BytesMut};

use crate::protocol::tags::be;

/// A column's type, as announced in RowDescription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    /// `text` (OID 25).
    Text,
    /// `int8` (OID 20).
    Int8,
    /// `float8` (OID 701).
    Float8,
    /// `bool` (OID 16).
    Bool,
}

impl Type {
    /// PostgreSQL's type OID.
    pub fn oid(self) -> u32 {
        match self {
            Type::Text => 25,
            Type::Int8 => 20,
            Type::Float8 => 701,
            Type::Bool => 16,
        }
    }

    /// `pg_type.typlen`: -1 for variable length.
    fn size(self) -> i16 {
        match self {
            Type::Text => -1,
            Type::Int8 | Type::Float8 => 8,
            Type::Bool => 1,
        }
    }
}

/// One field of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL: not measured, or not applicable to this row.
    Null,
    /// A string.
    Text(String),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A boolean.
    Bool(bool),
}

impl Value {
    /// An unsigned counter; values past `i64::MAX` are clamped (int8 is signed).
    pub fn uint(v: u64) -> Value {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }

    /// A `usize` count.
    pub fn count(v: usize) -> Value {
        Value::uint(v as u64)
    }

    /// Text, or NULL for `None`.
    pub fn opt_text(v: Option<impl Into<String>>) -> Value {
        v.map_or(Value::Null, |s| Value::Text(s.into()))
    }

    /// The text-format bytes, or `None` for NULL (PostgreSQL's output syntax).
    fn text(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            // text cannot hold NUL; a config value smuggling one loses it.
            Value::Text(s) => s.replace('\0', ""),
            Value::Int(i) => i.to_string(),
            Value::Float(f) if f.is_nan() => "NaN".to_string(),
            Value::Float(f) if f.is_infinite() => {
                if *f > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
            }
            Value::Float(f) => f.to_string(),
            Value::Bool(b) => if *b { "t" } else { "f" }.to_string(),
        })
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Text(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s)
    }
}

/// The rows of one command's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSet {
    columns: Vec<(String, Type)>,
    rows: Vec<Vec<Value>>,
}

impl ResultSet {
    /// An empty result with these columns.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = (S, Type)>) -> ResultSet {
        ResultSet {
            columns: columns.into_iter().map(|(n, t)| (n.into(), t)).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; a short row is padded with NULLs and a long one cut,
    /// so a slip in a report can never produce a malformed DataRow.
    pub fn push(&mut self, mut row: Vec<Value>) {
        row.resize(self.columns.len(), Value::Null);
        self.rows.push(row);
    }

    /// Column names, in order.
    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    /// The rows so far.
    pub fn rows(&self) -> &[Vec<Value>] {
        &self.rows
    }

    /// Appends RowDescription, the DataRows and CommandComplete `tag`.
    pub fn encode(&self, buf: &mut BytesMut, tag: &str) {
        row_description(buf, &self.columns);
        for row in &self.rows {
            data_row(buf, row);
        }
        command_complete(buf, tag);
    }
}

/// Writes `tag`, a length word, and the body produced by `f`, fixing up the length.
fn message(buf: &mut BytesMut, tag: u8, f: impl FnOnce(&mut BytesMut)) {
    buf.put_u8(tag);
    let len_at = buf.len();
    buf.put_u32(0);
    f(buf);
    let len = u32::try_from(buf.len() - len_at).unwrap_or(u32::MAX);
    buf[len_at..len_at + 4].copy_from_slice(&len.to_be_bytes());
}

/// A C string; interior NULs (which the protocol cannot carry) are dropped.
fn put_cstr(buf: &mut BytesMut, s: &str) {
    buf.extend(s.bytes().filter(|&b| b != 0));
    buf.put_u8(0);
}

/// RowDescription for text-format columns that belong to no table.
pub fn row_description(buf: &mut BytesMut, columns: &[(String, Type)]) {
    message(buf, be::ROW_DESCRIPTION, |b| {
        b.put_i16(i16::try_from(columns.len()).unwrap_or(i16::MAX));
        for (name, ty) in columns {
            put_cstr(b, name);
            b.put_u32(0); // table OID
            b.put_i16(0); // column number
            b.put_u32(ty.oid());
            b.put_i16(ty.size());
            b.put_i32(-1); // type modifier
            b.put_i16(0); // text format
        }
    });
}

/// DataRow in text format; NULL is length -1.
pub fn data_row(buf: &mut BytesMut, values: &[Value]) {
    message(buf, be::DATA_ROW, |b| {
        b.put_i16(i16::try_from(values.len()).unwrap_or(i16::MAX));
        for v in values {
            match v.text() {
                None => b.put_i32(-1),
                Some(s) => {
                    b.put_i32(i32::try_from(s.len()).unwrap_or(i32::MAX));
                    b.put_slice(s.as_bytes());
                }
            }
        }
    });
}

/// CommandComplete with `tag` (e.g. `SHOW`, `RELOAD`).
pub fn command_complete(buf: &mut BytesMut, tag: &str) {
    message(buf, be::COMMAND_COMPLETE, |b| put_cstr(b, tag));
}

/// EmptyQueryResponse, the answer to a query string with no command in it.
pub fn empty_query_response(buf: &mut BytesMut) {
    message(buf, be::EMPTY_QUERY_RESPONSE, |_| {});
}

#[cfg(test)]
mod tests {
    use super::*;
    use fallible_iterator::FallibleIterator;
    use postgres_protocol::message::backend::Message;

    fn parse(buf: &mut BytesMut) -> Message {
        Message::parse(buf).unwrap().expect("a whole message")
    }

    #[test]
    fn result_set_round_trips_through_postgres_protocol() {
        let mut rs = ResultSet::new([
            ("side", Type::Text),
            ("n", Type::Int8),
            ("mb", Type::Float8),
            ("tls", Type::Bool),
            ("missing", Type::Int8),
        ]);
        rs.push(vec![
            "client".into(),
            Value::uint(u64::MAX),
            Value::Float(1.5),
            Value::Bool(true),
            Value::Null,
        ]);
        rs.push(vec![
            Value::Text("a\0b".into()),
            Value::Int(-3),
            Value::Float(f64::NAN),
            Value::Bool(false),
        ]);
        let mut buf = BytesMut::new();
        rs.encode(&mut buf, "SHOW");

        let Message::RowDescription(desc) = parse(&mut buf) else {
            panic!("not a RowDescription")
        };
        let fields: Vec<(String, u32, i16)> = desc
            .fields()
            .map(|f| Ok((f.name().to_string(), f.type_oid(), f.format())))
            .collect()
            .unwrap();
        assert_eq!(
            fields,
            vec![
                ("side".into(), 25, 0),
                ("n".into(), 20, 0),
                ("mb".into(), 701, 0),
                ("tls".into(), 16, 0),
                ("missing".into(), 20, 0),
            ]
        );

        let mut rows = Vec::new();
        for _ in 0..2 {
            let Message::DataRow(row) = parse(&mut buf) else {
                panic!("not a DataRow")
            };
            let values: Vec<Option<String>> = row
                .ranges()
                .map(|r| Ok(r.map(|r| String::from_utf8_lossy(&row.buffer()[r]).into_owned())))
                .collect()
                .unwrap();
            rows.push(values);
        }
        let s = |v: &str| Some(v.to_string());
        assert_eq!(
            rows[0],
            vec![
                s("client"),
                s(&i64::MAX.to_string()),
                s("1.5"),
                s("t"),
                None
            ]
        );
        // The short row was padded; the NUL dropped out of the text.
        assert_eq!(rows[1], vec![s("ab"), s("-3"), s("NaN"), s("f"), None]);

        let Message::CommandComplete(cc) = parse(&mut buf) else {
            panic!("not a CommandComplete")
        };
        assert_eq!(cc.tag().unwrap(), "SHOW");
        assert!(buf.is_empty());
    }

    #[test]
    fn no_rows_bare_tag_and_empty_query() {
        let mut buf = BytesMut::new();
        ResultSet::new([("version", Type::Text)]).encode(&mut buf, "SHOW");
        command_complete(&mut buf, "RELOAD");
        empty_query_response(&mut buf);
        let Message::RowDescription(desc) = parse(&mut buf) else {
            panic!("not a RowDescription")
        };
        assert_eq!(desc.fields().count().unwrap(), 1);
        for tag in ["SHOW", "RELOAD"] {
            let Message::CommandComplete(cc) = parse(&mut buf) else {
                panic!("not a CommandComplete")
            };
            assert_eq!(cc.tag().unwrap(), tag);
        }
        assert!(matches!(parse(&mut buf), Message::EmptyQueryResponse));
        assert!(buf.is_empty());
    }
}
