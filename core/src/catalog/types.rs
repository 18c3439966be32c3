//! The catalog question about the routed columns' types that are not builtin (domains,
//! composites, enums, ranges, extension types, arrays of them), and how its answer becomes
//! `value::PgTypes`.
//!
//! The question starts from the column types and follows, recursively, every type a value
//! of them is printed through: a domain's base type (`typbasetype`, `typtypmod`), an
//! array's element type (a true array only: the element's `typarray` names it, which leaves
//! out `int2vector` and friends, printed with spaces), a composite's members (dropped ones
//! excluded, as `record_out` skips them). `citext` has no fixed OID and is recognised as the
//! type its extension owns (`pg_depend`, deptype `e`). The answer has one row per type and
//! one per composite member; the parser is strict and quotes the question on any other shape.

use super::questions::{CatalogError, Row};
use crate::value::types::{Member, TypeInfo, TypeKind};
use crate::value::PgTypes;
use std::collections::BTreeMap;

const Q: &str = "column types";

/// The question about `oids` (the routed columns' types the decoders do not know by OID).
pub fn types_query(oids: &[u32]) -> String {
    let list: Vec<String> = oids.iter().map(u32::to_string).collect();
    format!(
        "WITH RECURSIVE reach(oid) AS ( \
           SELECT pg_catalog.unnest('{{{}}}'::pg_catalog.oid[]) \
           UNION \
           SELECT x.next FROM reach r JOIN pg_catalog.pg_type t ON t.oid = r.oid \
           CROSS JOIN LATERAL ( \
             SELECT t.typbasetype WHERE t.typtype = 'd' \
             UNION ALL SELECT t.typelem WHERE t.typelem <> 0 AND (SELECT e.typarray \
               FROM pg_catalog.pg_type e WHERE e.oid = t.typelem) = t.oid \
             UNION ALL SELECT a.atttypid FROM pg_catalog.pg_attribute a WHERE t.typtype = 'c' \
               AND a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped \
           ) AS x(next)) \
         SELECT t.oid, pg_catalog.format_type(t.oid, NULL), t.typtype, \
           CASE WHEN e.typarray = t.oid THEN t.typelem END, \
           CASE WHEN e.typarray = t.oid THEN e.typdelim END, \
           NULLIF(t.typbasetype, 0), t.typtypmod, \
           (SELECT x.extname FROM pg_catalog.pg_depend d \
              JOIN pg_catalog.pg_extension x ON x.oid = d.refobjid \
              WHERE d.classid = 'pg_catalog.pg_type'::pg_catalog.regclass AND d.objid = t.oid \
              AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass \
              AND d.deptype = 'e' LIMIT 1), \
           NULL::pg_catalog.int2, NULL::pg_catalog.name, NULL::pg_catalog.oid, NULL::pg_catalog.int4 \
         FROM reach r JOIN pg_catalog.pg_type t ON t.oid = r.oid \
         LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem \
         UNION ALL \
         SELECT t.oid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
           a.attnum, a.attname, a.atttypid, a.atttypmod \
         FROM reach r JOIN pg_catalog.pg_type t ON t.oid = r.oid \
         JOIN pg_catalog.pg_attribute a ON a.attrelid = t.typrelid \
         WHERE t.typtype = 'c' AND a.attnum > 0 AND NOT a.attisdropped \
         ORDER BY 1, 9 NULLS FIRST",
        list.join(",")
    )
}

fn bad(problem: impl Into<String>) -> CatalogError {
    CatalogError {
        question: Q,
        problem: problem.into(),
    }
}

fn text<'a>(row: Row<'a>, index: usize) -> Result<Option<&'a str>, CatalogError> {
    row.get(index)
        .copied()
        .ok_or_else(|| bad(format!("row has {} columns, expected 12", row.len())))
}

fn required<'a>(row: Row<'a>, index: usize, what: &str) -> Result<&'a str, CatalogError> {
    text(row, index)?.ok_or_else(|| bad(format!("{what} is NULL")))
}

fn number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, CatalogError> {
    text.parse()
        .map_err(|_| bad(format!("{what} {text:?} is not a number in range")))
}

/// Reads the answer to [`types_query`].
pub fn parse_types(rows: &[Row<'_>]) -> Result<PgTypes, CatalogError> {
    let mut described: BTreeMap<u32, (String, &str, Option<TypeKind>)> = BTreeMap::new();
    let mut members: BTreeMap<u32, Vec<(i16, Member)>> = BTreeMap::new();
    for row in rows {
        if row.len() != 12 {
            return Err(bad(format!("row has {} columns, expected 12", row.len())));
        }
        let oid: u32 = number(required(row, 0, "oid")?, "oid")?;
        if let Some(position) = text(row, 8)? {
            let member = Member {
                name: required(row, 9, "member name")?.to_owned(),
                type_oid: number(required(row, 10, "member type")?, "member type")?,
                type_modifier: number(required(row, 11, "member typmod")?, "member typmod")?,
            };
            let position: i16 = number(position, "member number")?;
            members.entry(oid).or_default().push((position, member));
            continue;
        }
        let name = required(row, 1, "type name")?.to_owned();
        let typtype = required(row, 2, "typtype")?;
        let kind = type_kind(row, typtype)?;
        if described.insert(oid, (name, typtype, kind)).is_some() {
            return Err(bad(format!("type {oid} is described twice")));
        }
    }
    let mut types = PgTypes::new();
    for (oid, (name, typtype, kind)) in described {
        let kind = match kind {
            Some(kind) => kind,
            None => {
                let mut list = members.remove(&oid).unwrap_or_default();
                list.sort_by_key(|(position, _)| *position);
                if list.windows(2).any(|w| matches!(w, [a, b] if a.0 == b.0)) {
                    return Err(bad(format!("composite type {oid} lists a member twice")));
                }
                debug_assert_eq!(typtype, "c", "only composites wait for their members");
                TypeKind::Composite {
                    members: list.into_iter().map(|(_, m)| m).collect(),
                }
            }
        };
        types.insert(oid, TypeInfo { name, kind });
    }
    if let Some(oid) = members.keys().next() {
        return Err(bad(format!(
            "members are listed for type {oid}, which is not a composite type of the answer"
        )));
    }
    Ok(types)
}

/// The kind a type row describes; `None` for a composite, whose members follow.
fn type_kind(row: Row<'_>, typtype: &str) -> Result<Option<TypeKind>, CatalogError> {
    let element = text(row, 3)?;
    let extension = text(row, 7)?;
    Ok(Some(match (typtype, element) {
        ("d", _) => TypeKind::Domain {
            base: number(required(row, 5, "a domain's base type")?, "base type")?,
            type_modifier: number(required(row, 6, "typtypmod")?, "typtypmod")?,
        },
        ("b", Some(element)) => {
            let delimiter = match required(row, 4, "an array's delimiter")?.as_bytes() {
                &[byte] if byte.is_ascii() => byte,
                other => {
                    return Err(bad(format!(
                        "array delimiter {:?} is not one ASCII character",
                        String::from_utf8_lossy(other)
                    )))
                }
            };
            TypeKind::Array {
                element: number(element, "element type")?,
                delimiter,
            }
        }
        ("c", _) => return Ok(None),
        ("b", None) if extension == Some("citext") => TypeKind::Text,
        ("b", None) => TypeKind::Opaque { what: "base type" },
        ("e", _) => TypeKind::Opaque { what: "enum" },
        ("r", _) => TypeKind::Opaque { what: "range" },
        ("m", _) => TypeKind::Opaque { what: "multirange" },
        ("p", _) => TypeKind::Opaque {
            what: "pseudo-type",
        },
        (other, _) => return Err(bad(format!("unknown typtype {other:?}"))),
    }))
}

#[cfg(test)]
#[path = "types_tests.rs"]
mod tests;
