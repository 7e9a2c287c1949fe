//! Reading one key's value through its row: the given value or the row's
//! default, checked against the row's kind. Every error names the dotted
//! key. No I/O.

use std::time::Duration;

use super::{DefaultValue, Key, Kind};
use crate::config::validate::{parse_named, Named};
use crate::config::ConfigError;

impl Key {
    /// An integer: `value`, else the default, within the kind's range.
    pub(in crate::config) fn count(&self, value: Option<i64>) -> Result<usize, ConfigError> {
        let n = match (value, self.default) {
            (Some(n), _) | (None, DefaultValue::Int(n)) => n,
            _ => return Err(self.bug("has no integer default")),
        };
        self.check_count(&self.dotted(), n)
    }

    /// An integer of the named table `table` (`databases.app`); `None` when
    /// not given, so the caller falls back to what the key inherits.
    pub(in crate::config) fn count_in(
        &self,
        table: &str,
        value: Option<i64>,
    ) -> Result<Option<usize>, ConfigError> {
        value
            .map(|n| self.check_count(&format!("{table}.{}", self.name), n))
            .transpose()
    }

    fn check_count(&self, path: &str, n: i64) -> Result<usize, ConfigError> {
        let Kind::Count { min, max } = self.kind else {
            return Err(self.bug("is not a count"));
        };
        if n < min || n > max {
            let range = match (min, max) {
                (0, i64::MAX) => "0 or more".to_string(),
                (min, i64::MAX) => format!("at least {min}"),
                (min, max) => format!("from {min} to {max}"),
            };
            return Err(ConfigError::invalid(
                path,
                format!("must be {range}, not {n}"),
            ));
        }
        usize::try_from(n).map_err(|_| ConfigError::invalid(path, "too large"))
    }

    /// A duration: `value`, else the default; zero only if the kind allows it.
    pub(in crate::config) fn duration(
        &self,
        value: Option<String>,
    ) -> Result<Duration, ConfigError> {
        let Kind::Duration { zero } = self.kind else {
            return Err(self.bug("is not a duration"));
        };
        let d = self.parse_duration(value)?;
        if d.is_zero() && !zero {
            return Err(ConfigError::invalid(
                self.dotted(),
                "must be greater than zero",
            ));
        }
        Ok(d)
    }

    /// Whole seconds up to the kind's limit; `None` for `"0s"` (the system default).
    pub(in crate::config) fn seconds(
        &self,
        value: Option<String>,
    ) -> Result<Option<Duration>, ConfigError> {
        let Kind::Seconds { max } = self.kind else {
            return Err(self.bug("is not whole seconds"));
        };
        let d = self.parse_duration(value)?;
        if d.is_zero() {
            return Ok(None);
        }
        if d.subsec_nanos() != 0 || d.as_secs() > max {
            return Err(ConfigError::invalid(
                self.dotted(),
                format!("must be whole seconds from 1s to {max}s (\"0s\" = the system default)"),
            ));
        }
        Ok(Some(d))
    }

    fn parse_duration(&self, value: Option<String>) -> Result<Duration, ConfigError> {
        let text = self
            .text(value)
            .ok_or_else(|| self.bug("has no duration default"))?;
        humantime::parse_duration(&text).map_err(|e| {
            let hint = match text.trim().parse::<f64>() {
                Ok(_) => super::duration_hint(text.trim()),
                Err(_) => format!("{e} (write e.g. \"15s\", \"500ms\", \"2m\")"),
            };
            ConfigError::invalid(self.dotted(), format!("invalid duration {text:?}: {hint}"))
        })
    }

    /// A size in bytes, greater than zero.
    pub(in crate::config) fn bytes(&self, value: Option<String>) -> Result<usize, ConfigError> {
        let key = self.dotted();
        let text = self
            .text(value)
            .ok_or_else(|| self.bug("has no size default"))?;
        let bytes = text
            .parse::<bytesize::ByteSize>()
            .map_err(|e| {
                ConfigError::invalid(
                    &key,
                    format!(
                        "invalid size {text:?}: {e} (write e.g. \"256MiB\", \"4MB\", \"65536\")"
                    ),
                )
            })?
            .as_u64();
        match usize::try_from(bytes) {
            Ok(0) => Err(ConfigError::invalid(key, "must be greater than zero")),
            Ok(n) => Ok(n),
            Err(_) => Err(ConfigError::invalid(key, "too large")),
        }
    }

    /// A boolean: `value`, else the default.
    pub(in crate::config) fn flag(&self, value: Option<bool>) -> Result<bool, ConfigError> {
        match (value, self.default) {
            (Some(b), _) | (None, DefaultValue::Bool(b)) => Ok(b),
            _ => Err(self.bug("has no boolean default")),
        }
    }

    /// A string: `value`, else a string default; `None` for a key that has
    /// none (unset, required or inherited ones).
    pub(in crate::config) fn text(&self, value: Option<String>) -> Option<String> {
        match (value, self.default) {
            (Some(s), _) => Some(s),
            (None, DefaultValue::Str(s)) => Some(s.to_string()),
            _ => None,
        }
    }

    /// A list: `value`, else the default list (empty if the key has none).
    pub(in crate::config) fn names(&self, value: Option<Vec<String>>) -> Vec<String> {
        match (value, self.default) {
            (Some(v), _) => v,
            (None, DefaultValue::List(items)) => items.iter().map(|s| s.to_string()).collect(),
            _ => Vec::new(),
        }
    }

    /// One of the choices: `value`, else the default.
    pub(in crate::config) fn choice<T: Named>(
        &self,
        value: Option<String>,
    ) -> Result<T, ConfigError> {
        let text = self
            .text(value)
            .ok_or_else(|| self.bug("has no default choice"))?;
        parse_named(&self.dotted(), &text)
    }

    /// Several of the choices, `:`-separated and in order of preference
    /// (OpenSSL's way of writing a suite list): `value`, else the default.
    /// None may be left out or named twice.
    pub(in crate::config) fn ordered<T: Named + PartialEq>(
        &self,
        value: Option<String>,
    ) -> Result<Vec<T>, ConfigError> {
        let key = self.dotted();
        let text = self
            .text(value)
            .ok_or_else(|| self.bug("has no default list"))?;
        let mut out: Vec<T> = Vec::new();
        for name in text.split(':').map(str::trim) {
            if name.is_empty() {
                return Err(ConfigError::invalid(
                    &key,
                    format!("{text:?} has an empty entry (write names separated by \":\")"),
                ));
            }
            let item = parse_named(&key, name)?;
            if out.contains(&item) {
                return Err(ConfigError::invalid(
                    &key,
                    format!("{name} is listed twice"),
                ));
            }
            out.push(item);
        }
        Ok(out)
    }

    /// One of the choices in the named table `table`; `None` when not given.
    pub(in crate::config) fn choice_in<T: Named>(
        &self,
        table: &str,
        value: Option<&str>,
    ) -> Result<Option<T>, ConfigError> {
        value
            .map(|v| parse_named(&format!("{table}.{}", self.name), v))
            .transpose()
    }

    /// The table and the code that reads it disagree: an error naming the
    /// key instead of a panic on the user's config.
    fn bug(&self, what: &str) -> ConfigError {
        ConfigError::invalid(
            self.dotted(),
            format!("{what} in the key table (a bug in pgharbor)"),
        )
    }
}
