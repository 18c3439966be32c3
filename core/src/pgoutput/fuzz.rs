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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut out = u16::try_from(payload.len()).unwrap().to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn frames_split_on_their_length_and_a_short_last_frame_takes_the_rest() {
        assert_eq!(split_frame(&[0, 2, 7, 8, 9]), (&[7u8, 8][..], &[9u8][..]));
        assert_eq!(split_frame(&[0, 9, 7]), (&[7u8][..], &[][..]));
        assert_eq!(split_frame(&[5]), (&[5u8][..], &[][..]));
    }

    #[test]
    fn type_name_with_newline_found_by_fuzzing_does_not_panic() {
        fuzz_pgoutput(&frame(b"Y\0\0\x40\x01\0o\n\0"));
    }

    #[test]
    fn relation_then_rows_of_the_wrong_width_do_not_panic() {
        let payloads: [&[u8]; 4] = [
            b"R\0\0\0\x01\0t\0f\0\x01\x01id\0\0\0\0\x17\xFF\xFF\xFF\xFF",
            b"U\0\0\0\x01O\0\x01u\x4e\0\x01u",
            b"I\0\0\0\x01N\0\x02nn",
            b"T\0\0\0\x02\0\0\0\0\x01\0\0\0\x02",
        ];
        // Each payload is valid on its own; only the cache can object to the last two.
        let mut cache = RelationCache::new();
        let mut verdicts = Vec::new();
        for payload in payloads {
            let message = parse(payload).unwrap();
            verdicts.push(cache.check(&message).is_ok());
            if let Message::Relation(relation) = message {
                cache.apply(relation);
            }
        }
        assert_eq!(verdicts, [true, true, false, false]);
        let stream: Vec<u8> = payloads.iter().flat_map(|p| frame(p)).collect();
        fuzz_pgoutput(&stream);
    }
}
