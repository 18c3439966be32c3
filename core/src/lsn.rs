//! Log sequence numbers: positions in PostgreSQL's write-ahead log.

use std::fmt;
use std::str::FromStr;

/// A WAL position. Printed and parsed as PostgreSQL does: two hexadecimal halves of the
/// 64-bit value separated by a slash (`16/B374D848`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lsn(pub u64);

impl Lsn {
    /// `0/0`: on `START_REPLICATION` it means "from the slot's confirmed position"; on the
    /// wire (for example the `wal_start` of an XLogData carrying a Relation) it means "no
    /// position", and must never move a position.
    pub const ZERO: Lsn = Lsn(0);

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// Bytes from `earlier` to `self`, or 0 when `earlier` is not earlier.
    pub fn saturating_distance_from(self, earlier: Lsn) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Display for Lsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 & 0xFFFF_FFFF)
    }
}

/// Why a string is not an LSN.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseLsnError(pub String);

impl fmt::Display for ParseLsnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid LSN {:?}: expected two hexadecimal numbers of at most 8 digits separated by '/', like 16/B374D848",
            self.0
        )
    }
}

impl std::error::Error for ParseLsnError {}

impl FromStr for Lsn {
    type Err = ParseLsnError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseLsnError(s.to_owned());
        let (hi, lo) = s.split_once('/').ok_or_else(err)?;
        let half = |part: &str| {
            if part.is_empty() || part.len() > 8 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err());
            }
            u32::from_str_radix(part, 16).map_err(|_| err())
        };
        Ok(Lsn((u64::from(half(hi)?) << 32) | u64::from(half(lo)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn prints_like_postgres() {
        assert_eq!(Lsn(0x16_B374_D848).to_string(), "16/B374D848");
        assert_eq!(Lsn(0).to_string(), "0/0");
        assert_eq!(Lsn(0x1A0).to_string(), "0/1A0");
    }

    #[test]
    fn parses_postgres_spelling_in_either_case() {
        assert_eq!("16/B374D848".parse::<Lsn>().unwrap(), Lsn(0x16_B374_D848));
        assert_eq!("16/b374d848".parse::<Lsn>().unwrap(), Lsn(0x16_B374_D848));
        assert_eq!("0/0".parse::<Lsn>().unwrap(), Lsn::ZERO);
    }

    #[test]
    fn rejects_malformed_text_with_the_accepted_shape() {
        for bad in [
            "",
            "16",
            "/1",
            "1/",
            "1/2/3",
            "G/1",
            "123456789/0",
            "+1/0",
            " 1/0",
        ] {
            let err = bad.parse::<Lsn>().unwrap_err();
            assert!(err.to_string().contains("16/B374D848"), "{err}");
        }
    }

    #[test]
    fn orders_by_position() {
        assert!(Lsn(0x1_0000_0000) > Lsn(0xFFFF_FFFF));
        assert_eq!(Lsn(10).saturating_distance_from(Lsn(4)), 6);
        assert_eq!(Lsn(4).saturating_distance_from(Lsn(10)), 0);
    }

    proptest! {
        #[test]
        fn display_then_parse_is_identity(v: u64) {
            prop_assert_eq!(Lsn(v).to_string().parse::<Lsn>().unwrap(), Lsn(v));
        }

        #[test]
        fn ordering_matches_the_integer(a: u64, b: u64) {
            prop_assert_eq!(Lsn(a).cmp(&Lsn(b)), a.cmp(&b));
        }
    }
}
