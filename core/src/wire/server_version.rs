//! The server's version as its `server_version` parameter reports it at startup.

/// `server_version` as the server reports it at startup (`15.8 (Debian 15.8-1)`, `16beta2`,
/// `9.6.24`), as `server_version_num` would be: major * 10000 + minor (before 10: major *
/// 10000 + second * 100 + minor).
pub fn parse_server_version(text: &str) -> Option<u32> {
    let head: String = text
        .trim()
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let mut parts = head.split('.').filter(|p| !p.is_empty());
    let major: u32 = parts.next()?.parse().ok()?;
    let second: u32 = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    if major >= 10 {
        return major.checked_mul(10_000)?.checked_add(second.min(9_999));
    }
    let minor: u32 = parts.next().map_or(Some(0), |p| p.parse().ok())?;
    Some(major * 10_000 + second.min(99) * 100 + minor.min(99))
}

/// `150008` as `15.8`, for messages.
pub fn version_name(num: u32) -> String {
    if num >= 100_000 {
        format!("{}.{}", num / 10_000, num % 10_000)
    } else {
        format!("{}.{}.{}", num / 10_000, num / 100 % 100, num % 100)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_versions_read_as_server_version_num() {
        assert_eq!(
            parse_server_version("15.8 (Debian 15.8-0+deb12u1)"),
            Some(150_008)
        );
        assert_eq!(parse_server_version("18.4"), Some(180_004));
        assert_eq!(parse_server_version("16beta2"), Some(160_000));
        assert_eq!(parse_server_version("9.6.24"), Some(90_624));
        assert_eq!(parse_server_version("14.12"), Some(140_012));
        assert_eq!(parse_server_version(""), None);
        assert_eq!(parse_server_version("devel"), None);
        assert_eq!(version_name(150_008), "15.8");
        assert_eq!(version_name(90_624), "9.6.24");
    }
}
