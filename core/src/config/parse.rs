//! Parsers for single option values. Each error names the variable, the value and what is
//! accepted.

use super::input::{ConfigError, Pairs};

pub(super) fn parse_u64_in(
    pairs: &Pairs,
    key: &str,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    let raw = pairs.get_or_default(key);
    raw.parse::<u64>()
        .ok()
        .filter(|v| (min..=max).contains(v))
        .ok_or_else(|| {
            ConfigError::new(
                key,
                Some(raw),
                format!("a whole number from {min} to {max}"),
            )
        })
}

/// `parse_u64_in` for a limit that comes from elsewhere: a value past `max` is refused with
/// `why` beside the accepted range.
pub(super) fn parse_u64_capped(
    pairs: &Pairs,
    key: &str,
    min: u64,
    max: u64,
    why: &str,
) -> Result<u64, ConfigError> {
    let raw = pairs.get_or_default(key);
    match raw.parse::<u64>() {
        Ok(value) if value > max => Err(ConfigError::new(
            key,
            Some(raw),
            format!("a whole number from {min} to {max} ({why})"),
        )),
        _ => parse_u64_in(pairs, key, min, max),
    }
}

pub(super) fn parse_bool(pairs: &Pairs, key: &str) -> Result<bool, ConfigError> {
    let raw = pairs.get_or_default(key);
    match raw.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(ConfigError::new(
            key,
            Some(raw),
            "true or false (also 1/0, yes/no, on/off)",
        )),
    }
}

pub(super) fn parse_enum<T: Copy>(
    pairs: &Pairs,
    key: &str,
    choices: &[(&str, T)],
) -> Result<T, ConfigError> {
    let raw = pairs.get_or_default(key);
    choices
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(raw))
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            ConfigError::new(key, Some(raw), format!("one of {}", names.join(", ")))
        })
}

/// PostgreSQL replication slot names: lower-case letters, digits and underscores, at most
/// 63 bytes (NAMEDATALEN - 1).
pub(super) fn slot_name<'a>(key: &str, raw: &'a str) -> Result<&'a str, ConfigError> {
    let valid = !raw.is_empty()
        && raw.len() <= 63
        && raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if valid {
        Ok(raw)
    } else {
        Err(ConfigError::new(
            key,
            Some(raw),
            "1 to 63 characters from a-z, 0-9 and _ (PostgreSQL's rule for replication slot names)",
        ))
    }
}

/// `slotline_<pipeline>`, with every character a slot name cannot hold replaced by `_`, and
/// cut to 63 bytes.
pub(super) fn default_slot_name(pipeline: &str) -> String {
    let mut slot: String = "slotline_"
        .chars()
        .chain(pipeline.chars())
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    slot.truncate(63);
    slot
}

/// An `http://` or `https://` base URL, returned without a trailing slash.
pub(super) fn http_url(key: &str, raw: &str) -> Result<String, ConfigError> {
    const ACCEPTED: &str =
        "an http:// or https:// URL with a host and neither query nor fragment, like http://127.0.0.1:8080";
    let refuse =
        |why: &str| ConfigError::new(key, Some(raw), format!("{why}; accepted: {ACCEPTED}"));
    let parsed = url::Url::parse(raw).map_err(|e| {
        if raw.contains('@') {
            // Possibly user and password: never echoed.
            let accepted = format!("not a URL ({e}); accepted: {ACCEPTED}");
            ConfigError::new(
                key,
                Some("(not shown: it may contain credentials)"),
                accepted,
            )
        } else {
            refuse(&format!("not a URL ({e})"))
        }
    })?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(ConfigError::new(
            key,
            Some("(contains credentials)"),
            "a URL without user or password; put the API key in FELDERA_API_KEY",
        ));
    }
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(refuse(&format!("the scheme is {}", parsed.scheme())));
    }
    if !parsed.has_host() {
        return Err(refuse("it has no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(refuse("it has a query or a fragment"));
    }
    Ok(raw.trim_end_matches('/').to_owned())
}

/// A listening address `host:port` (`127.0.0.1:9187`, `[::]:9187`, `0.0.0.0:0`). Host
/// names are not resolved here: the shell binds to what is given.
pub(super) fn socket_address(key: &str, raw: &str) -> Result<String, ConfigError> {
    let accepted = "an IP address and port to listen on, like 127.0.0.1:9187 or [::]:9187";
    raw.parse::<std::net::SocketAddr>()
        .map(|_| raw.to_owned())
        .map_err(|_| ConfigError::new(key, Some(raw), accepted))
}

/// A sampling interval in milliseconds: 0 (off) or 100 to one hour.
pub(super) fn interval_ms(pairs: &Pairs, key: &str) -> Result<u64, ConfigError> {
    let raw = pairs.get_or_default(key);
    raw.parse::<u64>()
        .ok()
        .filter(|v| *v == 0 || (100..=3_600_000).contains(v))
        .ok_or_else(|| {
            ConfigError::new(
                key,
                Some(raw),
                "0 (off) or a whole number from 100 to 3600000",
            )
        })
}
