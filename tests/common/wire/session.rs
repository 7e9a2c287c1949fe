//! The raw client's conversations: the login (trust, cleartext, md5,
//! SCRAM-SHA-256) up to ReadyForQuery, a simple query, Terminate.

use std::io;
use std::time::Duration;

use bytes::BytesMut;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};
use postgres_protocol::message::frontend;

use super::{
    column_names, cstrings, data_row, name_value, startup_packet, ErrorFields, Failure,
    QueryResult, RawConn, Reply, Session, PROTOCOL_3_0,
};

impl RawConn {
    /// Sends a StartupMessage (protocol 3.0) with these parameters.
    pub fn send_startup(&mut self, params: &[(&str, &str)]) -> io::Result<()> {
        self.send(&startup_packet(PROTOCOL_3_0, params))
    }

    /// Full login: StartupMessage, then answers whatever authentication the
    /// server asks for (trust, cleartext, md5, SCRAM-SHA-256) with `password`,
    /// up to ReadyForQuery.
    pub fn login(
        &mut self,
        params: &[(&str, &str)],
        password: Option<&str>,
    ) -> Result<Session, Failure> {
        self.send_startup(params)
            .map_err(|e| Failure::Auth(format!("send startup: {e}")))?;
        self.finish_login(params, password)
    }

    /// The part of [`RawConn::login`] after the startup packet was sent (for
    /// callers that sent their own, e.g. protocol 3.1).
    pub fn finish_login(
        &mut self,
        params: &[(&str, &str)],
        password: Option<&str>,
    ) -> Result<Session, Failure> {
        let user = params
            .iter()
            .find(|(k, _)| *k == "user")
            .map(|(_, v)| *v)
            .unwrap_or("");
        let mut session = Session::default();
        self.auth_codes.clear();
        let mut scram: Option<ScramSha256> = None;
        let timeout = Duration::from_secs(15);
        loop {
            let reply = self.read_msg(timeout);
            let Reply::Msg(tag, body) = &reply else {
                return Err(Failure::Unexpected(reply));
            };
            match tag {
                b'R' => {
                    let code = i32::from_be_bytes(body[..4].try_into().unwrap());
                    session.auth_codes.push(code);
                    self.auth_codes.push(code);
                    let need_pw = || {
                        password.ok_or_else(|| {
                            Failure::Auth(format!("server asked for a password (code {code})"))
                        })
                    };
                    let mut buf = BytesMut::new();
                    match code {
                        0 => continue,
                        3 => frontend::password_message(need_pw()?.as_bytes(), &mut buf).unwrap(),
                        5 => {
                            let salt: [u8; 4] = body[4..8].try_into().unwrap();
                            let hash = md5_hash(user.as_bytes(), need_pw()?.as_bytes(), salt);
                            frontend::password_message(hash.as_bytes(), &mut buf).unwrap();
                        }
                        10 => {
                            let mechs: Vec<&[u8]> = body[4..]
                                .split(|&b| b == 0)
                                .filter(|m| !m.is_empty())
                                .collect();
                            if !mechs.contains(&&b"SCRAM-SHA-256"[..]) {
                                return Err(Failure::Auth(format!(
                                    "no SCRAM-SHA-256 among {:?}",
                                    mechs
                                        .iter()
                                        .map(|m| String::from_utf8_lossy(m))
                                        .collect::<Vec<_>>()
                                )));
                            }
                            let s = ScramSha256::new(
                                need_pw()?.as_bytes(),
                                ChannelBinding::unsupported(),
                            );
                            frontend::sasl_initial_response("SCRAM-SHA-256", s.message(), &mut buf)
                                .unwrap();
                            scram = Some(s);
                        }
                        11 => {
                            let s = scram
                                .as_mut()
                                .ok_or_else(|| Failure::Auth("SASLContinue before SASL".into()))?;
                            s.update(&body[4..])
                                .map_err(|e| Failure::Auth(format!("SCRAM continue: {e}")))?;
                            frontend::sasl_response(s.message(), &mut buf).unwrap();
                        }
                        12 => {
                            let s = scram
                                .as_mut()
                                .ok_or_else(|| Failure::Auth("SASLFinal before SASL".into()))?;
                            s.finish(&body[4..])
                                .map_err(|e| Failure::Auth(format!("SCRAM final: {e}")))?;
                            continue;
                        }
                        other => {
                            return Err(Failure::Auth(format!("unsupported auth request {other}")))
                        }
                    }
                    self.send(&buf)
                        .map_err(|e| Failure::Auth(format!("send auth response: {e}")))?;
                }
                b'v' => {
                    let minor = i32::from_be_bytes(body[..4].try_into().unwrap());
                    let names = cstrings(&body[8..]);
                    session.negotiate = Some((minor, names));
                }
                b'S' => {
                    let (k, v) = name_value(body);
                    session.params.insert(k.clone(), v.clone());
                    session.param_order.push((k, v));
                }
                b'K' => {
                    let pid = i32::from_be_bytes(body[..4].try_into().unwrap());
                    let key = i32::from_be_bytes(body[4..8].try_into().unwrap());
                    session.key = Some((pid, key));
                }
                b'N' => {}
                b'E' => return Err(Failure::Error(ErrorFields::parse(body))),
                b'Z' => {
                    session.status = body.first().copied().unwrap_or(0);
                    return Ok(session);
                }
                _ => return Err(Failure::Unexpected(reply)),
            }
        }
    }

    /// Runs one simple query and reads up to ReadyForQuery.
    pub fn query(&mut self, sql: &str) -> QueryResult {
        let mut buf = BytesMut::new();
        frontend::query(sql, &mut buf).unwrap();
        self.send(&buf).expect("send query");
        self.read_query_result(Duration::from_secs(30))
    }

    /// Reads a query's replies up to ReadyForQuery; panics on close/timeout.
    pub fn read_query_result(&mut self, timeout: Duration) -> QueryResult {
        let mut res = QueryResult::default();
        loop {
            match self.read_msg(timeout) {
                Reply::Msg(b'T', body) => res.columns = column_names(&body),
                Reply::Msg(b'D', body) => res.rows.push(data_row(&body)),
                Reply::Msg(b'C', body) => res.tags.extend(cstrings(&body)),
                Reply::Msg(b'E', body) => res.error = Some(ErrorFields::parse(&body)),
                Reply::Msg(b'N', body) => res.notices.push(ErrorFields::parse(&body)),
                Reply::Msg(b'S', body) => res.params.push(name_value(&body)),
                Reply::Msg(b'Z', body) => {
                    res.status = body.first().copied().unwrap_or(0);
                    return res;
                }
                Reply::Msg(_, _) => {}
                other => panic!("query interrupted: {} (so far {res:?})", other.summary()),
            }
        }
    }

    /// Sends Terminate.
    pub fn terminate(&mut self) {
        let mut buf = BytesMut::new();
        frontend::terminate(&mut buf);
        let _ = self.send(&buf);
    }
}
