use super::*;
use TargetSessionAttrs as T;

fn role(read_only: Flag, hot_standby: Flag) -> ServerRole {
    ServerRole {
        read_only,
        hot_standby,
    }
}

const PRIMARY: ServerRole = ServerRole {
    read_only: Flag::Off,
    hot_standby: Flag::Off,
};
const STANDBY: ServerRole = ServerRole {
    read_only: Flag::Off,
    hot_standby: Flag::On,
};
const RO_PRIMARY: ServerRole = ServerRole {
    read_only: Flag::On,
    hot_standby: Flag::Off,
};

#[test]
fn fit_follows_libpq_check_target() {
    let cases = [
        (T::Any, ServerRole::UNKNOWN, Fit::Fits),
        (T::ReadWrite, PRIMARY, Fit::Fits),
        (T::ReadWrite, STANDBY, Fit::Misfit("session is read-only")),
        (
            T::ReadWrite,
            RO_PRIMARY,
            Fit::Misfit("session is read-only"),
        ),
        (T::ReadOnly, STANDBY, Fit::Fits),
        (T::ReadOnly, RO_PRIMARY, Fit::Fits),
        (
            T::ReadOnly,
            PRIMARY,
            Fit::Misfit("session is not read-only"),
        ),
        (T::Primary, PRIMARY, Fit::Fits),
        (T::Primary, RO_PRIMARY, Fit::Fits),
        (
            T::Primary,
            STANDBY,
            Fit::Misfit("server is in hot standby mode"),
        ),
        (T::Standby, STANDBY, Fit::Fits),
        (
            T::Standby,
            PRIMARY,
            Fit::Misfit("server is not in hot standby mode"),
        ),
        (T::PreferStandby, STANDBY, Fit::Fits),
        (
            T::PreferStandby,
            PRIMARY,
            Fit::Misfit("server is not in hot standby mode"),
        ),
        // A server before 14 reports neither: ask.
        (T::ReadWrite, ServerRole::UNKNOWN, Fit::Ask(Probe::ReadOnly)),
        (
            T::ReadWrite,
            role(Flag::Off, Flag::Unknown),
            Fit::Ask(Probe::ReadOnly),
        ),
        (
            T::Standby,
            role(Flag::Off, Flag::Unknown),
            Fit::Ask(Probe::Recovery),
        ),
        (T::Primary, ServerRole::UNKNOWN, Fit::Ask(Probe::Recovery)),
    ];
    for (attrs, role, want) in cases {
        assert_eq!(fit(attrs, role), want, "{attrs:?} {role:?}");
    }
}

#[test]
fn open_backends_are_retired_only_for_a_known_misfit() {
    assert!(still_fits(T::ReadWrite, PRIMARY).is_ok());
    assert_eq!(
        still_fits(T::ReadWrite, RO_PRIMARY),
        Err("session is read-only")
    );
    assert_eq!(
        still_fits(T::Standby, PRIMARY),
        Err("server is not in hot standby mode")
    );
    // prefer-standby's second pass may have put it on a primary.
    assert!(still_fits(T::PreferStandby, PRIMARY).is_ok());
    assert!(still_fits(T::ReadWrite, ServerRole::UNKNOWN).is_ok());
}

#[test]
fn params_then_login_role() {
    let mut params = ParamSet::default();
    params.set("in_hot_standby", "on");
    let now = ServerRole::from_params(&params);
    assert_eq!(now, role(Flag::Unknown, Flag::On));
    assert_eq!(now.or(PRIMARY), role(Flag::Off, Flag::On));
    params.set("in_hot_standby", "off");
    params.set("default_transaction_read_only", "on");
    assert_eq!(ServerRole::from_params(&params), RO_PRIMARY);
    assert_eq!(STANDBY.as_str(), "standby");
    assert_eq!(PRIMARY.as_str(), "primary");
}

#[test]
fn data_row_first_column_and_malformed_rows() {
    let row = |cols: &[Option<&[u8]>]| {
        let mut b = (cols.len() as i16).to_be_bytes().to_vec();
        for c in cols {
            match c {
                Some(v) => {
                    b.extend((v.len() as i32).to_be_bytes());
                    b.extend(*v);
                }
                None => b.extend((-1i32).to_be_bytes()),
            }
        }
        b
    };
    assert_eq!(first_column(&row(&[Some(b"on")])), Some(&b"on"[..]));
    assert_eq!(
        first_column(&row(&[Some(b"t"), Some(b"x")])),
        Some(&b"t"[..])
    );
    assert_eq!(first_column(&row(&[None])), None);
    assert_eq!(first_column(&row(&[])), None);
    assert_eq!(
        first_column(&[0, 1, 0, 0, 0, 9, b'o']),
        None,
        "length past the end"
    );
    assert_eq!(first_column(&[0]), None);
}
