//! Fuzz harness for the pgoutput parser, relation cache and Display.
//!
//! The input is a sequence of payloads, each preceded by a big-endian u16 length (the last
//! one may run short and takes what is left), so one input can announce a relation, alter
//! it and then send rows against it. Properties checked on every payload:
//! - `parse` returns a value or an error, never panics;
//! - a parsed message re-encodes to exactly the input bytes (the parser keeps every bit);
//! - the cache accepts or refuses the message without panicking, and Display renders it.

use std::fmt::Write as _;

use super::cache::RelationCache;
use super::encode::encode;
use super::message::Message;
use super::parse::parse;

/// Runs one fuzz input. Panics only when a property above is violated.
pub fn fuzz_pgoutput(data: &[u8]) {
    let mut cache = RelationCache::new();
    let mut rest = data;
    while !rest.is_empty() {
        let (payload, next) = split_frame(rest);
        rest = next;
        check_payload(&mut cache, payload);
    }
}

fn split_frame(data: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, body)) = data.split_first_chunk::<2>() else {
        return (data, &[]);
    };
    let len = usize::from(u16::from_be_bytes(*len));
    body.split_at_checked(len).unwrap_or((body, &[]))
}

fn check_payload(cache: &mut RelationCache, payload: &[u8]) {
    let Ok(message) = parse(payload) else {
        return;
    };
    assert_eq!(
        encode(&message),
        payload,
        "re-encoding a parsed message must give back its bytes: {message:?}"
    );
    let mut line = String::new();
    // Writing to a String cannot fail; a Display impl returning Err would be a bug.
    assert!(write!(line, "{message}").is_ok());
    assert!(write!(line, "{}", cache.display(&message)).is_ok());
    assert!(
        !line.contains('\n'),
        "Display must stay on one line: {line}"
    );
    match &message {
        Message::Relation(relation) => {
            cache.apply(relation.clone());
            assert_eq!(cache.get(relation.oid), Some(relation));
        }
        Message::Update(update) => {
            if cache.check(&message).is_ok() {
                let filled = update.new_filled_from_old();
                assert_eq!(filled.len(), update.new.len());
            }
            let _ = update.key_changed_per_message();
        }
        other => {
            let _ = cache.check(other);
        }
    }
}
