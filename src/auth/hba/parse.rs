//! One tokenized pg_hba.conf line into a typed [`Rule`], with the checks
//! and messages of PostgreSQL's `parse_hba_line` and `parse_hba_auth_opt`.

use std::net::IpAddr;

use ipnet::IpNet;

use super::rule::{
    Address, ClientCert, ConnType, DatabaseMatch, Method, NameRegex, Rule, UserMatch,
};
use super::tokens::{Line, Token};
use super::HbaError;

/// PostgreSQL's options for the methods pgharbor refuses, so that such an
/// option gets PostgreSQL's "only valid for" message.
const FOREIGN_OPTIONS: &[(&str, &str)] = &[
    ("pamservice", "pam"),
    ("pam_use_hostname", "pam"),
    ("ldapurl", "ldap"),
    ("ldaptls", "ldap"),
    ("ldapscheme", "ldap"),
    ("ldapserver", "ldap"),
    ("ldapport", "ldap"),
    ("ldapbinddn", "ldap"),
    ("ldapbindpasswd", "ldap"),
    ("ldapsearchattribute", "ldap"),
    ("ldapsearchfilter", "ldap"),
    ("ldapbasedn", "ldap"),
    ("ldapprefix", "ldap"),
    ("ldapsuffix", "ldap"),
    ("krb_realm", "gssapi and sspi"),
    ("include_realm", "gssapi and sspi"),
    ("compat_realm", "sspi"),
    ("upn_username", "sspi"),
    ("radiusservers", "radius"),
    ("radiusports", "radius"),
    ("radiussecrets", "radius"),
    ("radiusidentifiers", "radius"),
];

/// Parses one tokenized line.
pub fn parse_rule(line: &Line) -> Result<Rule, HbaError> {
    rule(line).map_err(|message| line.error(message))
}

fn rule(line: &Line) -> Result<Rule, String> {
    let mut fields = line.fields.iter();
    let conn = single(
        fields.next(),
        "",
        "multiple values specified for connection type",
    )?;
    let conn_type = conn_type(&conn.text)?;
    let databases = (fields.next())
        .ok_or("end-of-line before database specification")?
        .iter()
        .map(database)
        .collect::<Result<_, _>>()?;
    let users = (fields.next())
        .ok_or("end-of-line before role specification")?
        .iter()
        .map(user)
        .collect::<Result<_, _>>()?;
    let address = match conn_type {
        ConnType::Local => None,
        _ => Some(address(&mut fields)?),
    };
    let method = single(
        fields.next(),
        "end-of-line before authentication method",
        "multiple values specified for authentication type",
    )?;
    let method = method_for(&method.text, conn_type)?;
    let mut rule = Rule {
        file: line.file.clone(),
        line: line.number,
        conn_type,
        databases,
        users,
        address,
        method,
        client_cert: None,
        map: None,
    };
    for token in fields.flatten() {
        option(&mut rule, &token.text)?;
    }
    if method == Method::Cert {
        rule.client_cert = Some(ClientCert::VerifyFull);
    }
    Ok(rule)
}

/// The only token of a field that must hold one.
fn single<'a>(
    field: Option<&'a Vec<Token>>,
    missing: &str,
    multiple: &str,
) -> Result<&'a Token, String> {
    match field.map(Vec::as_slice) {
        Some([token]) => Ok(token),
        Some(_) => Err(multiple.to_owned()),
        None => Err(missing.to_owned()),
    }
}

fn conn_type(text: &str) -> Result<ConnType, String> {
    Ok(match text {
        "local" => ConnType::Local,
        "host" => ConnType::Host,
        "hostssl" => ConnType::HostSsl,
        "hostnossl" => ConnType::HostNoSsl,
        "hostgssenc" | "hostnogssenc" => {
            return Err(format!(
                "connection type \"{text}\" is not supported by pgharbor, which never \
                 offers GSSAPI encryption; use \"host\" or \"hostssl\""
            ))
        }
        _ => return Err(format!("invalid connection type \"{text}\"")),
    })
}

fn database(token: &Token) -> Result<DatabaseMatch, String> {
    for keyword in ["samerole", "samegroup"] {
        if token.is_keyword(keyword) {
            return Err(format!(
                "\"{keyword}\" needs role membership, which pgharbor cannot check; \
                 list the databases instead"
            ));
        }
    }
    Ok(match () {
        _ if token.is_keyword("all") => DatabaseMatch::All,
        _ if token.is_keyword("sameuser") => DatabaseMatch::SameUser,
        _ if token.is_keyword("replication") => DatabaseMatch::Replication,
        // PostgreSQL compiles a leading slash even when quoted.
        _ => match token.text.strip_prefix('/') {
            Some(source) => DatabaseMatch::Regex(NameRegex::new(source)?),
            None => DatabaseMatch::Name(token.text.clone()),
        },
    })
}

fn user(token: &Token) -> Result<UserMatch, String> {
    if !token.quoted && token.text.starts_with('+') {
        return Err(format!(
            "role membership (\"{}\") cannot be checked by pgharbor; list the member roles instead",
            token.text
        ));
    }
    if token.is_keyword("all") {
        return Ok(UserMatch::All);
    }
    Ok(match token.text.strip_prefix('/') {
        Some(source) => UserMatch::Regex(NameRegex::new(source)?),
        None => UserMatch::Name(token.text.clone()),
    })
}

fn address<'a>(fields: &mut impl Iterator<Item = &'a Vec<Token>>) -> Result<Address, String> {
    let token = single(
        fields.next(),
        "end-of-line before IP address specification",
        "multiple values specified for host address",
    )?;
    if token.is_keyword("all") {
        return Ok(Address::All);
    }
    if token.is_keyword("samehost") {
        return Ok(Address::SameHost);
    }
    if token.is_keyword("samenet") {
        return Ok(Address::SameNet);
    }
    let (addr_text, bits) = match token.text.split_once('/') {
        Some((addr, bits)) => (addr, Some(bits)),
        None => (token.text.as_str(), None),
    };
    let addr: Option<IpAddr> = addr_text.parse().ok();
    match (addr, bits) {
        (None, Some(_)) => Err(format!(
            "specifying both host name and CIDR mask is invalid: \"{}\"",
            token.text
        )),
        (None, None) => Err(not_an_address(addr_text)),
        (Some(addr), Some(bits)) => cidr(addr, bits)
            .ok_or_else(|| format!("invalid CIDR mask in address \"{}\"", token.text)),
        (Some(addr), None) => {
            let mask = single(
                fields.next(),
                "end-of-line before netmask specification",
                "multiple values specified for netmask",
            )?;
            let mask: IpAddr =
                (mask.text.parse()).map_err(|_| format!("invalid IP mask \"{}\"", mask.text))?;
            if mask.is_ipv4() != addr.is_ipv4() {
                return Err("IP address and mask do not match".to_owned());
            }
            Ok(Address::Masked { addr, mask })
        }
    }
}

/// What to say of an address field that is not an IP address.
fn not_an_address(text: &str) -> String {
    let hostname_like = !text.is_empty()
        && (text.bytes()).all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
    if hostname_like {
        format!(
            "host name \"{text}\" in the address field is not supported by pgharbor \
             (it needs DNS lookups); write an IP address, a CIDR range, samehost or samenet"
        )
    } else {
        format!("invalid IP address \"{text}\"")
    }
}

fn cidr(addr: IpAddr, bits: &str) -> Option<Address> {
    if bits.is_empty() || !bits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let bits: u8 = bits.parse().ok()?;
    IpNet::new(addr, bits).ok().map(Address::Cidr)
}

fn method_for(text: &str, conn_type: ConnType) -> Result<Method, String> {
    let method = match text {
        "trust" => Method::Trust,
        "reject" => Method::Reject,
        "md5" => Method::Md5,
        "scram-sha-256" => Method::ScramSha256,
        "password" => Method::Password,
        "peer" => Method::Peer,
        "cert" => Method::Cert,
        // Kept from PostgreSQL for old files: ident on a socket is peer.
        "ident" if conn_type == ConnType::Local => Method::Peer,
        "ident" | "gss" | "sspi" | "pam" | "bsd" | "ldap" | "radius" => {
            return Err(format!(
                "invalid authentication method \"{text}\": not supported by pgharbor"
            ))
        }
        _ => return Err(format!("invalid authentication method \"{text}\"")),
    };
    if method == Method::Peer && conn_type != ConnType::Local {
        return Err("peer authentication is only supported on local sockets".to_owned());
    }
    if method == Method::Cert && conn_type != ConnType::HostSsl {
        return Err("cert authentication is only supported on hostssl connections".to_owned());
    }
    Ok(method)
}

fn option(rule: &mut Rule, text: &str) -> Result<(), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!(
            "authentication option not in name=value format: {text}"
        ));
    };
    let only_valid = |methods: &str| {
        format!(
            "authentication option \"{name}\" is only valid for authentication methods {methods}"
        )
    };
    match name {
        "map" => {
            if !matches!(rule.method, Method::Peer | Method::Cert) {
                return Err(only_valid("peer and cert"));
            }
            rule.map = Some(value.to_owned());
        }
        "clientcert" => {
            if rule.conn_type != ConnType::HostSsl {
                return Err("clientcert can only be configured for \"hostssl\" rows".to_owned());
            }
            rule.client_cert = Some(match value {
                "verify-full" => ClientCert::VerifyFull,
                "verify-ca" if rule.method == Method::Cert => return Err(
                    "clientcert only accepts \"verify-full\" when using \"cert\" authentication"
                        .to_owned(),
                ),
                "verify-ca" => ClientCert::VerifyCa,
                _ => return Err(format!("invalid value for clientcert: \"{value}\"")),
            });
        }
        "clientname" => {
            return Err(
                "authentication option \"clientname\" is not supported by pgharbor".to_owned(),
            )
        }
        _ => {
            return Err(match FOREIGN_OPTIONS.iter().find(|(n, _)| *n == name) {
                Some((_, methods)) => only_valid(methods),
                None => format!("unrecognized authentication option name: \"{name}\""),
            })
        }
    }
    Ok(())
}
