//! Where a completion token comes from, as far as it says.
//!
//! Feldera's tokens are URL-safe base64 without padding of `{"u": <incarnation uuid>,
//! "e": <input endpoint id>, "c": <count>}` (docs/feldera.md). On one endpoint of one
//! incarnation a token counts the requests accepted so far, and Feldera completes them in
//! that order: a later token complete means every earlier one is. Across a restart that
//! inference is false (the new incarnation numbers its endpoints afresh and holds nothing
//! of the old one), so it is drawn only between tokens that name the same incarnation and
//! endpoint. A token that does not decode names nothing: it vouches only for itself.
//!
//! Owns: decoding a token's origin. Never asks Feldera anything.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;

/// Longer tokens are not decoded (Feldera's are about 100 characters).
const MAX_TOKEN_LEN: usize = 1024;

/// The incarnation and input endpoint a token was issued by.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct TokenOrigin {
    #[serde(rename = "u")]
    pub incarnation: String,
    #[serde(rename = "e")]
    pub endpoint: u64,
}

/// The origin `token` names, or `None` when it does not decode as Feldera's tokens do.
pub fn token_origin(token: &str) -> Option<TokenOrigin> {
    if token.len() > MAX_TOKEN_LEN {
        return None;
    }
    let json = URL_SAFE_NO_PAD.decode(token.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&json).ok()
}

/// Whether `later` being complete proves `earlier` complete: both name the same
/// incarnation and endpoint.
pub fn vouches_for(later: &str, earlier: &str) -> bool {
    later == earlier
        || matches!(
            (token_origin(later), token_origin(earlier)),
            (Some(a), Some(b)) if a == b
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(json: &str) -> String {
        URL_SAFE_NO_PAD.encode(json)
    }

    #[test]
    fn a_token_of_the_same_incarnation_and_endpoint_vouches_for_an_earlier_one() {
        let earlier = token(r#"{"u":"a1","e":3,"c":7}"#);
        let later = token(r#"{"u":"a1","e":3,"c":9}"#);
        assert!(vouches_for(&later, &earlier));
        assert_eq!(
            token_origin(&later),
            Some(TokenOrigin {
                incarnation: "a1".into(),
                endpoint: 3
            })
        );
    }

    #[test]
    fn a_token_of_a_new_incarnation_or_another_endpoint_vouches_for_nothing_earlier() {
        let earlier = token(r#"{"u":"a1","e":3,"c":7}"#);
        assert!(!vouches_for(&token(r#"{"u":"b2","e":3,"c":9}"#), &earlier));
        assert!(!vouches_for(&token(r#"{"u":"a1","e":0,"c":9}"#), &earlier));
    }

    #[test]
    fn undecodable_or_oversized_tokens_vouch_only_for_themselves() {
        let good = token(r#"{"u":"a1","e":3,"c":7}"#);
        for odd in ["t1", "!!!", &token("[1,2]"), &"A".repeat(MAX_TOKEN_LEN + 1)] {
            assert!(!vouches_for(odd, &good), "{odd}");
            assert!(!vouches_for(&good, odd), "{odd}");
            assert!(vouches_for(odd, odd));
        }
        assert_eq!(
            token_origin(&token(r#"{"u":"a1","e":3}"#)).map(|o| o.endpoint),
            Some(3)
        );
    }
}
