//! Completion tokens in Feldera's encoding: URL-safe base64 without padding of the JSON
//! `{"u": "<uuid of this incarnation>", "e": <endpoint id>, "c": <count>}`.
//!
//! Owns: encoding and decoding. Never decides whether a token is complete (see `state`).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// The decoded content of a completion token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionToken {
    /// Incarnation (run) of the pipeline that issued the token.
    pub u: String,
    /// Input endpoint the request went through.
    pub e: u64,
    /// Records queued on that endpoint when the request's body ended: the token covers
    /// records 1 to `c`.
    pub c: u64,
}

impl CompletionToken {
    pub fn encode(&self) -> String {
        // Serializing three plain fields cannot fail.
        let json = serde_json::to_vec(self).unwrap_or_default();
        URL_SAFE_NO_PAD.encode(json)
    }

    /// Decodes a token; the error says which layer was wrong.
    pub fn decode(token: &str) -> Result<CompletionToken, String> {
        let bytes = URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|e| format!("completion token is not URL-safe base64: {e}"))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            format!("completion token does not hold {{\"u\": uuid, \"e\": endpoint, \"c\": count}}: {e}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_uses_the_url_safe_alphabet_without_padding() {
        let t = CompletionToken {
            u: "0b7e3f5c-1d2a-4c5e-9f00-aabbccddeeff".to_string(),
            e: 3,
            c: 1_000_000,
        };
        let s = t.encode();
        assert!(
            !s.contains('=') && !s.contains('+') && !s.contains('/'),
            "{s}"
        );
        assert_eq!(CompletionToken::decode(&s), Ok(t));
    }

    #[test]
    fn garbage_and_wrong_json_are_rejected() {
        assert!(CompletionToken::decode("!!!").is_err());
        let wrong = URL_SAFE_NO_PAD.encode(br#"{"u": "x"}"#);
        assert!(CompletionToken::decode(&wrong).is_err());
    }
}
