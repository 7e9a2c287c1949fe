//! Protocol bytes by hand: startup-style packets and frontend messages to
//! send, and the bodies of the server messages the raw client reads.

use super::CANCEL_REQUEST_CODE;

/// A startup-style packet: length, version code, then name/value C strings
/// and the final NUL.
pub fn startup_packet(version: u32, params: &[(&str, &str)]) -> Vec<u8> {
    let mut body = version.to_be_bytes().to_vec();
    for (k, v) in params {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut pkt = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    pkt.extend_from_slice(&body);
    pkt
}

/// SSLRequest, GSSENCRequest and the like: length 8 plus a code.
pub fn request_packet(code: u32) -> Vec<u8> {
    let mut pkt = 8u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&code.to_be_bytes());
    pkt
}

/// CancelRequest for (process id, secret key).
pub fn cancel_packet(pid: i32, key: i32) -> Vec<u8> {
    let mut pkt = 16u32.to_be_bytes().to_vec();
    pkt.extend_from_slice(&CANCEL_REQUEST_CODE.to_be_bytes());
    pkt.extend_from_slice(&pid.to_be_bytes());
    pkt.extend_from_slice(&key.to_be_bytes());
    pkt
}

/// A frontend message: type byte, length, body.
pub fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// ParameterStatus body: name and value (which may be empty).
pub fn name_value(body: &[u8]) -> (String, String) {
    let mut parts = body.splitn(3, |&b| b == 0);
    let name = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
    let value = String::from_utf8_lossy(parts.next().unwrap_or(&[])).into_owned();
    (name, value)
}

pub fn cstrings(bytes: &[u8]) -> Vec<String> {
    bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The values of a DataRow body (NULL as None).
/// The column names of a RowDescription body.
pub fn column_names(body: &[u8]) -> Vec<String> {
    let n = i16::from_be_bytes([body[0], body[1]]);
    let mut rest = &body[2..];
    let mut names = Vec::new();
    for _ in 0..n {
        let end = rest.iter().position(|&b| b == 0).expect("column name NUL");
        names.push(String::from_utf8_lossy(&rest[..end]).into_owned());
        // Table OID, attribute number, type OID, size, modifier, format.
        rest = &rest[end + 1 + 18..];
    }
    names
}

pub fn data_row(body: &[u8]) -> Vec<Option<String>> {
    let n = u16::from_be_bytes([body[0], body[1]]) as usize;
    let mut pos = 2;
    let mut row = Vec::with_capacity(n);
    for _ in 0..n {
        let len = i32::from_be_bytes(body[pos..pos + 4].try_into().unwrap());
        pos += 4;
        if len < 0 {
            row.push(None);
        } else {
            let len = len as usize;
            row.push(Some(
                String::from_utf8_lossy(&body[pos..pos + len]).into_owned(),
            ));
            pos += len;
        }
    }
    row
}
