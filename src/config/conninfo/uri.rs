//! The `postgresql://` URI form of a connection string, split into the same
//! (key, value) pairs as the keyword form.

use percent_encoding::percent_decode_str;

use super::ConnInfoError;

/// Splits `[user[:password]@][host][:port][/dbname][?key=value&...]` into
/// pairs, as libpq's `conninfo_uri_parse_options`.
pub(super) fn uri_pairs(rest: &str) -> Result<Vec<(String, String)>, ConnInfoError> {
    let mut pairs = Vec::new();
    // libpq looks for the credentials' '@' up to the first '/'.
    let mut rest = rest;
    if let Some(at) = rest
        .find(['@', '/'])
        .filter(|&i| rest[i..].starts_with('@'))
    {
        let (user, password) = match rest[..at].split_once(':') {
            Some((user, password)) => (user, Some(password)),
            None => (&rest[..at], None),
        };
        pairs.push(("user".to_string(), decode(user, "user name")?));
        if let Some(password) = password {
            pairs.push(("password".to_string(), decode(password, "password")?));
        }
        rest = &rest[at + 1..];
    }

    // libpq's multi-host form: netloc[:port] pairs separated by commas,
    // gathered into one host list and one port list (empty entries kept).
    let mut hosts = Vec::new();
    let mut ports = Vec::new();
    let mut any_port = false;
    loop {
        let host;
        if let Some(bracketed) = rest.strip_prefix('[') {
            let close = bracketed.find(']').ok_or_else(|| {
                ConnInfoError::Uri("missing \"]\" after the IPv6 host address".to_string())
            })?;
            host = &bracketed[..close];
            if host.is_empty() {
                return Err(ConnInfoError::Uri(
                    "empty IPv6 host address in brackets".to_string(),
                ));
            }
            rest = &bracketed[close + 1..];
        } else {
            let end = rest.find([':', '/', '?', ',']).unwrap_or(rest.len());
            host = &rest[..end];
            rest = &rest[end..];
        }
        hosts.push(decode(host, "host")?);
        let mut port = String::new();
        if let Some(after_colon) = rest.strip_prefix(':') {
            let end = after_colon
                .find(['/', '?', ','])
                .unwrap_or(after_colon.len());
            port = decode(&after_colon[..end], "port")?;
            any_port = true;
            rest = &after_colon[end..];
        }
        ports.push(port);
        match rest.strip_prefix(',') {
            Some(next) => rest = next,
            None => break,
        }
    }
    let host_list = hosts.join(",");
    if !host_list.is_empty() {
        pairs.push(("host".to_string(), host_list));
    }
    if any_port {
        pairs.push(("port".to_string(), ports.join(",")));
    }

    let query = match rest.chars().next() {
        None => None,
        Some('?') => Some(&rest[1..]),
        Some('/') => {
            let (db, query) = match rest[1..].split_once('?') {
                Some((db, query)) => (db, Some(query)),
                None => (&rest[1..], None),
            };
            pairs.push(("dbname".to_string(), decode(db, "database name")?));
            query
        }
        Some(c) => {
            return Err(ConnInfoError::Uri(format!(
                "unexpected character \"{c}\" after the host (expected \":\", \"/\" or \"?\")"
            )))
        }
    };
    for param in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let mut parts = param.splitn(3, '=');
        let key = decode(parts.next().unwrap_or(""), "query parameter name")?;
        let (Some(value), None) = (parts.next(), parts.next()) else {
            let problem = if param.contains('=') {
                "extra"
            } else {
                "missing"
            };
            return Err(ConnInfoError::Uri(format!(
                "{problem} key/value separator \"=\" in query parameter \"{key}\""
            )));
        };
        let value = decode(value, "query parameter value")?;
        // libpq's one URI-only spelling: ssl=true means sslmode=require.
        if key == "ssl" {
            if value != "true" {
                return Err(ConnInfoError::InvalidValue {
                    key,
                    value,
                    reason: "the only accepted value is \"true\"".to_string(),
                });
            }
            pairs.push(("sslmode".to_string(), "require".to_string()));
        } else {
            pairs.push((key, value));
        }
    }
    Ok(pairs)
}

/// Strict percent-decoding: `%` must start two hex digits, `%00` is refused,
/// and the result must be UTF-8. Errors name `what`, never the value.
fn decode(s: &str, what: &str) -> Result<String, ConnInfoError> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            match bytes.get(i + 1..i + 3) {
                Some(b"00") => {
                    return Err(ConnInfoError::Uri(format!("forbidden %00 in the {what}")))
                }
                Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => i += 3,
                _ => {
                    return Err(ConnInfoError::Uri(format!(
                        "invalid percent-encoding in the {what}"
                    )))
                }
            }
        } else {
            i += 1;
        }
    }
    percent_decode_str(s)
        .decode_utf8()
        .map(|v| v.into_owned())
        .map_err(|_| ConnInfoError::Uri(format!("the {what} is not valid UTF-8 once decoded")))
}
