//! `service.user`: started as root to bind privileged ports or socket
//! directories, pgharbor becomes an ordinary user before it reads
//! credentials or talks to anyone. Works only when started as root or as
//! that user already (as PgBouncer's `user`).
//!
//! The files pgharbor must still manage as that user — the Unix socket file
//! it removes at exit, the log file it reopens — are handed to the user
//! first; their directories must let the user remove and create files, which
//! is checked and warned about.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Why the user could not be switched.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// No such user in the password database.
    #[error("service.user: no such user: {0:?}")]
    NoSuchUser(String),
    /// Not root and not that user already.
    #[error(
        "service.user: switching to {user:?} needs pgharbor started as root (running as uid {uid})"
    )]
    NotRoot {
        /// Wanted user.
        user: String,
        /// Current effective uid.
        uid: u32,
    },
    /// A set*id call failed.
    #[error("service.user: cannot switch to {user:?}: {call}: {source}")]
    Switch {
        /// Wanted user.
        user: String,
        /// The failing call.
        call: &'static str,
        /// Cause.
        source: std::io::Error,
    },
    /// Root privileges could be regained after the switch.
    #[error(
        "service.user: root privileges could be regained after switching to {0:?}; refusing to run"
    )]
    Regained(String),
}

/// A user from the password database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Login name.
    pub name: String,
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
}

/// Looks `name` up with getpwnam_r (thread-safe, unlike getpwnam).
pub fn lookup(name: &str) -> Result<User, PrivilegeError> {
    let missing = || PrivilegeError::NoSuchUser(name.to_string());
    let cname = CString::new(name).map_err(|_| missing())?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: zeroed passwd is a valid out-parameter; getpwnam_r fills it
    // with pointers into `buf`, which outlives every use below.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: all pointers are valid for the sizes given.
    let rc = unsafe {
        libc::getpwnam_r(
            cname.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    if rc != 0 || found.is_null() {
        return Err(missing());
    }
    // SAFETY: on success pw_name points at a NUL-terminated string in `buf`.
    let real = unsafe { CStr::from_ptr(pw.pw_name) }
        .to_string_lossy()
        .into_owned();
    Ok(User {
        name: real,
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// Becomes `user`, first giving it the files in `own` (those that exist).
pub fn switch(user: &User, own: &[&Path]) -> Result<(), PrivilegeError> {
    // SAFETY: geteuid cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == user.uid {
        tracing::info!(user = %user.name, "already running as service.user");
        return Ok(());
    }
    if euid != 0 {
        return Err(PrivilegeError::NotRoot {
            user: user.name.clone(),
            uid: euid,
        });
    }
    for path in own {
        chown(path, user);
    }
    set_ids(user)?;
    // SAFETY: setuid takes a plain integer; success here would be a hole.
    if unsafe { libc::setuid(0) } == 0 {
        return Err(PrivilegeError::Regained(user.name.clone()));
    }
    tracing::info!(user = %user.name, uid = user.uid, gid = user.gid, "switched to service.user");
    for path in own {
        warn_unless_dir_writable(path, user);
    }
    Ok(())
}

/// Supplementary groups, then group, then user: once the uid is dropped the
/// group calls would be refused.
fn set_ids(user: &User) -> Result<(), PrivilegeError> {
    let fail = |call| PrivilegeError::Switch {
        user: user.name.clone(),
        call,
        source: std::io::Error::last_os_error(),
    };
    let cname = CString::new(user.name.as_str())
        .map_err(|_| PrivilegeError::NoSuchUser(user.name.clone()))?;
    // SAFETY: initgroups/setgid/setuid take a C string we own and integers.
    // glibc applies setgid/setuid to every thread of the process.
    unsafe {
        if libc::initgroups(cname.as_ptr(), user.gid) != 0 {
            return Err(fail("initgroups"));
        }
        if libc::setgid(user.gid) != 0 {
            return Err(fail("setgid"));
        }
        if libc::setuid(user.uid) != 0 {
            return Err(fail("setuid"));
        }
    }
    Ok(())
}

fn chown(path: &Path, user: &User) {
    if let Err(e) = std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid)) {
        tracing::warn!(path = %path.display(), user = %user.name, error = %e, "cannot hand file to service.user");
    }
}

/// Removing (socket file) or recreating (rotated log file) needs write
/// permission on the directory, which the switch cannot grant.
fn warn_unless_dir_writable(path: &Path, user: &User) {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return;
    };
    let Ok(cdir) = CString::new(dir.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: access takes a C string we own; it checks with the real uid,
    // which is service.user's now.
    if unsafe { libc::access(cdir.as_ptr(), libc::W_OK) } != 0 {
        tracing::warn!(
            path = %path.display(),
            user = %user.name,
            "directory not writable by service.user: this file cannot be removed or recreated by pgharbor"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_up_root_and_refuses_unknown_users() {
        let root = lookup("root").unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(matches!(
            lookup("no-such-user-pgharbor"),
            Err(PrivilegeError::NoSuchUser(_))
        ));
        assert!(lookup("nul\0byte").is_err());
    }
}
