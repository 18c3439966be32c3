//! One-line, stable, human-readable rendering of pgoutput messages for traces and snapshots.
//!
//! `Display for Message` names relations by OID (a message alone does not know names);
//! `RelationCache::display` names them `schema.table` from the cache. Commit timestamps
//! are left out on purpose: they differ on every run of a capture and would make every
//! snapshot unstable, while LSNs and xids are what a reader follows through a trace.
//! Long values are cut (length plus the first `SHOWN_VALUE_BYTES` bytes) so a 200 KB TOAST
//! value does not bloat a snapshot. Nothing here is parsed back.

use std::fmt::{self, Write as _};

use super::cache::RelationCache;
use super::message::{Datum, Message, OldKind, Tuple};
use super::relation::{Relation, RelationColumn};

/// Bytes of a value printed before it is cut.
pub const SHOWN_VALUE_BYTES: usize = 32;

impl fmt::Display for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_message(f, self, None)
    }
}

/// A message rendered with relation names from a cache (see `RelationCache::display`).
#[derive(Clone, Copy, Debug)]
pub struct NamedMessage<'c, 'm, 'a> {
    cache: &'c RelationCache,
    message: &'m Message<'a>,
}

impl fmt::Display for NamedMessage<'_, '_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_message(f, self.message, Some(self.cache))
    }
}

impl RelationCache {
    /// Renders `message` naming its relations `schema.table` where the cache knows them
    /// (an unknown OID prints as `rel=<oid>`).
    pub fn display<'c, 'm, 'a>(&'c self, message: &'m Message<'a>) -> NamedMessage<'c, 'm, 'a> {
        NamedMessage {
            cache: self,
            message,
        }
    }
}

impl fmt::Display for Datum<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Datum::Null => f.write_str("n"),
            Datum::Unchanged => f.write_str("u"),
            Datum::Text(bytes) => {
                f.write_str("t:")?;
                write_quoted(f, bytes)
            }
            Datum::Binary(bytes) => {
                f.write_str("b:")?;
                write_hex(f, bytes)
            }
        }
    }
}

impl fmt::Display for Tuple<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_char('[')?;
        for (i, datum) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{datum}")?;
        }
        f.write_char(']')
    }
}

impl fmt::Display for RelationColumn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_name(f, &self.name)?;
        write!(f, " type={}", self.type_oid)?;
        if self.type_modifier != -1 {
            write!(f, " typmod={}", self.type_modifier)?;
        }
        if self.in_replica_identity {
            f.write_str(" key")?;
        }
        Ok(())
    }
}

impl fmt::Display for Relation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_qualified(f, &self.namespace, &self.name)?;
        write!(
            f,
            " oid={} identity={} cols=[",
            self.oid,
            self.replica_identity.as_str()
        )?;
        for (i, column) in self.columns.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{column}")?;
        }
        f.write_char(']')
    }
}

fn write_relation(
    f: &mut fmt::Formatter<'_>,
    oid: u32,
    names: Option<&RelationCache>,
) -> fmt::Result {
    match names.and_then(|cache| cache.get(oid)) {
        Some(relation) => write_qualified(f, &relation.namespace, &relation.name),
        None => write!(f, "rel={oid}"),
    }
}

fn old_label(kind: OldKind) -> &'static str {
    match kind {
        OldKind::Key => "key",
        OldKind::Row => "old",
    }
}

fn write_message(
    f: &mut fmt::Formatter<'_>,
    message: &Message<'_>,
    names: Option<&RelationCache>,
) -> fmt::Result {
    match message {
        Message::Begin(m) => write!(f, "BEGIN final={} xid={}", m.final_lsn, m.xid),
        Message::Commit(m) => {
            write!(f, "COMMIT lsn={} end={}", m.commit_lsn, m.end_lsn)?;
            if m.flags != 0 {
                write!(f, " flags=0x{:02X}", m.flags)?;
            }
            Ok(())
        }
        Message::Origin(m) => {
            f.write_str("ORIGIN ")?;
            write_quoted(f, m.name.as_bytes())?;
            write!(f, " lsn={}", m.commit_lsn)
        }
        Message::Relation(r) => write!(f, "RELATION {r}"),
        Message::Type(m) => {
            f.write_str("TYPE ")?;
            write_qualified(f, m.namespace, m.name)?;
            write!(f, " oid={}", m.oid)
        }
        Message::Insert(m) => {
            f.write_str("INSERT ")?;
            write_relation(f, m.relation_oid, names)?;
            write!(f, " ({} cols) new={}", m.new.len(), m.new)
        }
        Message::Update(m) => {
            f.write_str("UPDATE ")?;
            write_relation(f, m.relation_oid, names)?;
            write!(f, " ({} cols)", m.new.len())?;
            if let Some(old) = &m.old {
                write!(f, " {}={}", old_label(old.kind), old.tuple)?;
            }
            write!(f, " new={}", m.new)
        }
        Message::Delete(m) => {
            f.write_str("DELETE ")?;
            write_relation(f, m.relation_oid, names)?;
            write!(
                f,
                " ({} cols) {}={}",
                m.old.tuple.len(),
                old_label(m.old.kind),
                m.old.tuple
            )
        }
        Message::Truncate(m) => {
            f.write_str("TRUNCATE")?;
            for (i, oid) in m.relation_oids.iter().enumerate() {
                f.write_str(if i == 0 { " " } else { ", " })?;
                write_relation(f, *oid, names)?;
            }
            if m.cascade {
                f.write_str(" cascade")?;
            }
            if m.restart_identity {
                f.write_str(" restart-identity")?;
            }
            Ok(())
        }
        Message::Logical(m) => {
            let kind = if m.transactional {
                "transactional"
            } else {
                "non-transactional"
            };
            write!(f, "MESSAGE {kind} lsn={} prefix=", m.lsn)?;
            write_quoted(f, m.prefix.as_bytes())?;
            f.write_str(" content=")?;
            write_quoted(f, m.content)
        }
    }
}

/// `schema.name`, with pgoutput's empty namespace spelled `pg_catalog`.
fn write_qualified(f: &mut fmt::Formatter<'_>, namespace: &str, name: &str) -> fmt::Result {
    write_name(
        f,
        if namespace.is_empty() {
            "pg_catalog"
        } else {
            namespace
        },
    )?;
    f.write_char('.')?;
    write_name(f, name)
}

/// An identifier as is, unless it holds a control character (a quoted SQL identifier may
/// hold a newline) or a double quote: then quoted and escaped, so a line stays one line.
fn write_name(f: &mut fmt::Formatter<'_>, name: &str) -> fmt::Result {
    if name.chars().any(|c| c.is_control() || c == '"') {
        write!(f, "\"{}\"", name.escape_debug())
    } else {
        f.write_str(name)
    }
}

/// The first `SHOWN_VALUE_BYTES` bytes, moved back to a character boundary when the cut
/// would split a UTF-8 sequence.
fn shown_prefix(bytes: &[u8]) -> &[u8] {
    let Some(window) = bytes.get(..SHOWN_VALUE_BYTES) else {
        return bytes;
    };
    match std::str::from_utf8(window) {
        // `error_len() == None`: the window ends inside a character.
        Err(e) if e.error_len().is_none() => window.get(..e.valid_up_to()).unwrap_or(window),
        _ => window,
    }
}

fn write_cut_suffix(f: &mut fmt::Formatter<'_>, shown: usize, total: usize) -> fmt::Result {
    if shown < total {
        write!(f, "...({total} bytes)")?;
    }
    Ok(())
}

/// `"text"` with Rust-style escapes; bytes that are not UTF-8 print as `\xNN`.
fn write_quoted(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    let shown = shown_prefix(bytes);
    f.write_char('"')?;
    for chunk in shown.utf8_chunks() {
        for c in chunk.valid().chars() {
            write!(f, "{}", c.escape_debug())?;
        }
        for b in chunk.invalid() {
            write!(f, "\\x{b:02X}")?;
        }
    }
    f.write_char('"')?;
    write_cut_suffix(f, shown.len(), bytes.len())
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    let shown = bytes.get(..SHOWN_VALUE_BYTES).unwrap_or(bytes);
    f.write_str("0x")?;
    for b in shown {
        write!(f, "{b:02x}")?;
    }
    write_cut_suffix(f, shown.len(), bytes.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lsn::Lsn;
    use crate::pgoutput::relation::ReplicaIdentity;
    use crate::pgoutput::{encode, parse};
    use crate::time::PgTime;
    use insta::assert_snapshot;

    fn users() -> Relation {
        let column = |name: &str, type_oid, type_modifier, key| RelationColumn {
            in_replica_identity: key,
            name: name.to_owned(),
            type_oid,
            type_modifier,
        };
        Relation {
            oid: 16384,
            namespace: "public".to_owned(),
            name: "users".to_owned(),
            replica_identity: ReplicaIdentity::Default,
            columns: vec![
                column("id", 23, -1, true),
                column("name", 1043, 68, false),
                column("bio", 25, -1, false),
            ],
        }
    }

    fn shown(bytes: &[u8]) -> String {
        parse(bytes).unwrap().to_string()
    }

    #[test]
    fn transaction_framing_prints_positions_and_xid_but_not_times() {
        assert_snapshot!(shown(&encode::begin(Lsn(0x1A2B3C), PgTime(5), 734)), @"BEGIN final=0/1A2B3C xid=734");
        assert_snapshot!(shown(&encode::commit(Lsn(0x1A2B3C), Lsn(0x1_0000_0010), PgTime(5))), @"COMMIT lsn=0/1A2B3C end=1/10");
        assert_snapshot!(shown(&encode::origin(Lsn(0x10), "node \"a\"")), @r#"ORIGIN "node \"a\"" lsn=0/10"#);
    }

    #[test]
    fn commit_flags_show_only_when_set() {
        let mut bytes = encode::commit(Lsn(1), Lsn(2), PgTime(0));
        bytes[1] = 0x01;
        assert_snapshot!(shown(&bytes), @"COMMIT lsn=0/1 end=0/2 flags=0x01");
    }

    #[test]
    fn relation_and_type_print_their_shape() {
        assert_snapshot!(shown(&encode::relation(&users())), @"RELATION public.users oid=16384 identity=default cols=[id type=23 key, name type=1043 typmod=68, bio type=25]");
        assert_snapshot!(shown(&encode::type_message(16390, "", "mood")), @"TYPE pg_catalog.mood oid=16390");
    }

    #[test]
    fn rows_print_by_oid_alone_and_by_name_through_the_cache() {
        let row = [Datum::Text(b"1"), Datum::Null, Datum::Unchanged];
        let bytes = encode::insert(16384, row.iter().copied().collect());
        let message = parse(&bytes).unwrap();
        assert_snapshot!(message.to_string(), @r#"INSERT rel=16384 (3 cols) new=[t:"1", n, u]"#);
        let mut cache = RelationCache::new();
        cache.apply(users());
        assert_snapshot!(cache.display(&message).to_string(), @r#"INSERT public.users (3 cols) new=[t:"1", n, u]"#);
    }

    #[test]
    fn update_and_delete_label_their_old_image() {
        let mut cache = RelationCache::new();
        cache.apply(users());
        let key = encode::row(&[Some("1"), None, None]);
        let new = encode::row(&[Some("2"), Some("ann"), None]);
        let line = |bytes: Vec<u8>| cache.display(&parse(&bytes).unwrap()).to_string();
        assert_snapshot!(line(encode::update(16384, None, new.clone())), @r#"UPDATE public.users (3 cols) new=[t:"2", t:"ann", n]"#);
        assert_snapshot!(line(encode::update(16384, Some((OldKind::Key, key.clone())), new.clone())), @r#"UPDATE public.users (3 cols) key=[t:"1", n, n] new=[t:"2", t:"ann", n]"#);
        assert_snapshot!(line(encode::update(16384, Some((OldKind::Row, new.clone())), key.clone())), @r#"UPDATE public.users (3 cols) old=[t:"2", t:"ann", n] new=[t:"1", n, n]"#);
        assert_snapshot!(line(encode::delete(16384, OldKind::Key, key)), @r#"DELETE public.users (3 cols) key=[t:"1", n, n]"#);
        assert_snapshot!(line(encode::delete(16384, OldKind::Row, new)), @r#"DELETE public.users (3 cols) old=[t:"2", t:"ann", n]"#);
    }

    #[test]
    fn truncate_lists_relations_and_options() {
        let mut cache = RelationCache::new();
        cache.apply(users());
        let bytes = encode::truncate(&[16384, 7], true, true);
        let message = parse(&bytes).unwrap();
        assert_snapshot!(cache.display(&message).to_string(), @"TRUNCATE public.users, rel=7 cascade restart-identity");
        assert_snapshot!(shown(&encode::truncate(&[16384], false, false)), @"TRUNCATE rel=16384");
    }

    #[test]
    fn logical_message_prints_kind_prefix_and_content() {
        assert_snapshot!(shown(&encode::logical_message(false, Lsn(0x20), "app", b"hi\n\xFF")), @r#"MESSAGE non-transactional lsn=0/20 prefix="app" content="hi\n\xFF""#);
    }

    #[test]
    fn long_values_print_length_and_first_32_bytes() {
        let big = "x".repeat(200_000);
        let bytes = encode::insert(1, encode::row(&[Some(&big)]));
        assert_snapshot!(shown(&bytes), @r#"INSERT rel=1 (1 cols) new=[t:"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"...(200000 bytes)]"#);
        let binary: Vec<u8> = (0..40).collect();
        let bytes = encode::insert(1, [Datum::Binary(&binary)].into_iter().collect());
        assert_snapshot!(shown(&bytes), @"INSERT rel=1 (1 cols) new=[b:0x000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f...(40 bytes)]");
    }

    #[test]
    fn cut_never_splits_a_utf8_character() {
        // 31 ASCII bytes then 'é' (2 bytes): the cut at 32 would fall inside 'é'.
        let text = format!("{}é{}", "a".repeat(31), "b".repeat(10));
        let bytes = encode::insert(1, encode::row(&[Some(&text)]));
        assert_snapshot!(shown(&bytes), @r#"INSERT rel=1 (1 cols) new=[t:"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"...(43 bytes)]"#);
    }

    #[test]
    fn names_with_control_characters_or_quotes_are_quoted_to_stay_on_one_line() {
        assert_snapshot!(shown(&encode::type_message(7, "my schema", "a\nb")), @r#"TYPE my schema."a\nb" oid=7"#);
        let mut relation = users();
        relation.name = "say \"hi\"".to_owned();
        relation.columns.truncate(1);
        relation.columns[0].name = "tab\there".to_owned();
        assert_snapshot!(shown(&encode::relation(&relation)), @r#"RELATION public."say \"hi\"" oid=16384 identity=default cols=["tab\there" type=23 key]"#);
    }

    #[test]
    fn exactly_32_bytes_is_not_cut() {
        let text = "z".repeat(32);
        let bytes = encode::insert(1, encode::row(&[Some(&text)]));
        assert_snapshot!(shown(&bytes), @r#"INSERT rel=1 (1 cols) new=[t:"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"]"#);
    }
}
