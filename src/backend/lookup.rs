//! The pooler's own parameterised query on a backend, for `auth.query`:
//! the extended protocol binds the user name as a parameter, so no name
//! can change what the query does (PgBouncer does the same).

use super::owed::{Expect, Reply};
use super::session::parse_error_fields;
use super::{BackendError, Link, PoolerStatement};

/// A row's columns as sent: `None` for NULL.
pub type Row = Vec<Option<Vec<u8>>>;

impl Link {
    /// Runs `query` with `$1` bound to `param` (text) in the unnamed
    /// statement and portal, and returns its rows. Bounded by
    /// [`Link::command_timeout`]; a timeout breaks the link.
    pub async fn lookup(&mut self, query: &str, param: &str) -> Result<Vec<Row>, BackendError> {
        let timeout = self.command_timeout;
        match tokio::time::timeout(timeout, self.lookup_untimed(query, param)).await {
            Ok(done) => done,
            Err(_) => {
                self.ledger
                    .break_with("no answer to auth.query within server_command_timeout");
                Err(BackendError::CommandTimeout {
                    what: PoolerStatement::Lookup,
                    timeout,
                })
            }
        }
    }

    async fn lookup_untimed(&mut self, query: &str, param: &str) -> Result<Vec<Row>, BackendError> {
        use postgres_protocol::message::frontend;
        let protocol = |e: std::io::Error| BackendError::Protocol(e.to_string());
        frontend::parse("", query, std::iter::empty(), &mut self.queued).map_err(protocol)?;
        frontend::bind(
            "",
            "",
            std::iter::empty(),
            std::iter::once(param),
            |v, buf| {
                buf.extend_from_slice(v.as_bytes());
                Ok(postgres_protocol::IsNull::No)
            },
            std::iter::empty(),
            &mut self.queued,
        )
        .map_err(|_| BackendError::Protocol("cannot bind the auth.query parameter".into()))?;
        frontend::execute("", 0, &mut self.queued).map_err(protocol)?;
        frontend::sync(&mut self.queued);
        let mut fixes = Vec::new();
        for reply in [
            Reply::Parse {
                id: None,
                def: None,
            },
            Reply::Bind { stmt: None },
            Reply::Execute,
            Reply::Sync,
        ] {
            self.ledger.push(Expect::Injected(reply), &mut fixes);
        }
        // The server's unnamed statement is the pooler's now, nobody's to Bind.
        self.ledger.set_unnamed(None);
        let mut bodies = Vec::new();
        self.drain_keeping(Some(&mut bodies)).await?;
        if let Some(body) = self.ledger.take_pooler_error() {
            return Err(BackendError::Server(parse_error_fields(&body)));
        }
        bodies
            .iter()
            .map(|b| data_row(b))
            .collect::<Option<Vec<Row>>>()
            .ok_or_else(|| BackendError::Protocol("malformed DataRow".into()))
    }
}

/// A DataRow body's columns; `None` if it is malformed.
fn data_row(body: &[u8]) -> Option<Row> {
    let (count, mut rest) = body.split_first_chunk::<2>()?;
    let count = u16::from_be_bytes(*count);
    let mut row = Vec::with_capacity(usize::from(count).min(16));
    for _ in 0..count {
        let (len, after) = rest.split_first_chunk::<4>()?;
        let len = i32::from_be_bytes(*len);
        rest = after;
        if len == -1 {
            row.push(None);
            continue;
        }
        let len = usize::try_from(len).ok()?;
        if len > rest.len() {
            return None;
        }
        let (value, after) = rest.split_at(len);
        row.push(Some(value.to_vec()));
        rest = after;
    }
    rest.is_empty().then_some(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(cols: &[Option<&[u8]>]) -> Vec<u8> {
        let mut b = (cols.len() as u16).to_be_bytes().to_vec();
        for c in cols {
            match c {
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(v) => {
                    b.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    b.extend_from_slice(v);
                }
            }
        }
        b
    }

    #[test]
    fn data_rows_read_values_and_nulls() {
        let b = body(&[Some(b"alice"), None, Some(b"")]);
        assert_eq!(
            data_row(&b),
            Some(vec![Some(b"alice".to_vec()), None, Some(Vec::new())])
        );
        assert_eq!(data_row(&body(&[])), Some(vec![]));
    }

    #[test]
    fn malformed_data_rows_are_refused_not_read_past() {
        let good = body(&[Some(b"alice"), Some(b"md5abc")]);
        // Every truncation of a valid row, and trailing garbage.
        for n in 0..good.len() {
            assert_eq!(data_row(&good[..n]), None, "truncated at {n}");
        }
        let mut long = good.clone();
        long.push(0);
        assert_eq!(data_row(&long), None);
        // A length past the end, a negative length other than -1, a huge count.
        let mut past = 1u16.to_be_bytes().to_vec();
        past.extend_from_slice(&100i32.to_be_bytes());
        past.extend_from_slice(b"abc");
        assert_eq!(data_row(&past), None);
        let mut neg = 1u16.to_be_bytes().to_vec();
        neg.extend_from_slice(&(-2i32).to_be_bytes());
        assert_eq!(data_row(&neg), None);
        assert_eq!(data_row(&u16::MAX.to_be_bytes()), None);
    }
}
