//! `PgTypes`: what PostgreSQL's catalog says about the column types the decoders do not know
//! by a fixed OID (domains, composites, enums, ranges, extension types such as citext, and
//! the arrays of any of them).
//!
//! The builtin types of `oid` need no catalog: their OIDs are the same on every server. Every
//! other type gets its OID when it is created, so the startup asks the catalog about the
//! routed columns' types once (`catalog::types`) and the value planner reads the answer here.
//! pgoutput's Relation message carries a column's own type OID (a domain's, not its base
//! type's) and a type modifier of -1 for a domain column: the domain's base type and its
//! modifier live only in the catalog (`pg_type.typbasetype`, `typtypmod`).
//!
//! This module never asks anything and never plans: it is the answer, read by `value::plan`
//! and the column mapping.

use super::oid;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// The most levels of domains, arrays and composites one column type may nest. PostgreSQL
/// has no such limit but rejects a type containing itself; the limit keeps planning and
/// decoding bounded whatever a catalog answer says.
pub const MAX_TYPE_DEPTH: usize = 32;

/// One member of a composite type, in attribute order (dropped attributes are not listed:
/// `record_out` skips them too).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

impl Member {
    /// A member without a type modifier.
    pub fn new(name: &str, type_oid: u32) -> Member {
        Member {
            name: name.into(),
            type_oid,
            type_modifier: -1,
        }
    }
}

/// What kind of type the catalog described.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeKind {
    /// `CREATE DOMAIN ... AS base`: values are printed by the base type's output function.
    /// `base` may itself be a domain; `type_modifier` is what the domain applies to its base
    /// (`numeric(12,2)`), -1 when none.
    Domain { base: u32, type_modifier: i32 },
    /// A true array type (the element type's `typarray` names it), printed by `array_out`
    /// with `delimiter` between elements (`,` for every type but `box`).
    Array { element: u32, delimiter: u8 },
    /// A composite type, printed by `record_out`.
    Composite { members: Vec<Member> },
    /// A type whose text is plain text (the `citext` extension's type).
    Text,
    /// Any other type: its text is all slotline can send. `what` names the kind for messages
    /// (`enum`, `range`, ...).
    Opaque { what: &'static str },
}

impl TypeKind {
    pub fn domain(base: u32, type_modifier: i32) -> TypeKind {
        TypeKind::Domain {
            base,
            type_modifier,
        }
    }

    /// An array whose elements are separated by `,` (every type's but `box`'s).
    pub fn array(element: u32) -> TypeKind {
        TypeKind::Array {
            element,
            delimiter: b',',
        }
    }
}

/// One type as the catalog described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// `format_type(oid, NULL)`: the SQL spelling, schema-qualified when not on the path.
    pub name: String,
    pub kind: TypeKind,
}

/// The catalog's answer about the routed columns' types, keyed by OID. Empty when every
/// routed column has a builtin type (then the startup does not ask).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PgTypes {
    types: BTreeMap<u32, TypeInfo>,
}

/// A type with its domains unwrapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resolved {
    /// The first type that is not a domain.
    pub oid: u32,
    /// The modifier that applies to it: the innermost domain's, or the column's own when
    /// the column is not a domain (as `getBaseTypeAndTypmod` computes it).
    pub type_modifier: i32,
}

impl PgTypes {
    pub fn new() -> PgTypes {
        PgTypes::default()
    }

    /// Records what the catalog said about `oid` (replacing an earlier answer).
    pub fn insert(&mut self, oid: u32, info: TypeInfo) {
        self.types.insert(oid, info);
    }

    /// `insert` of a type named `name` (for catalogs built by hand: tests, fuzzing).
    pub fn add(&mut self, oid: u32, name: &str, kind: TypeKind) {
        self.insert(
            oid,
            TypeInfo {
                name: name.into(),
                kind,
            },
        );
    }

    pub fn get(&self, oid: u32) -> Option<&TypeInfo> {
        self.types.get(&oid)
    }

    pub fn is_empty(&self) -> bool {
        self.types.is_empty()
    }

    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Every described type, by OID.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &TypeInfo)> {
        self.types.iter().map(|(oid, info)| (*oid, info))
    }

    /// Unwraps the domains around `oid`. `None` when the chain is longer than
    /// [`MAX_TYPE_DEPTH`] (a catalog answer with a cycle; PostgreSQL has none).
    pub fn resolve(&self, oid: u32, type_modifier: i32) -> Option<Resolved> {
        let mut resolved = Resolved { oid, type_modifier };
        for _ in 0..=MAX_TYPE_DEPTH {
            match self.get(resolved.oid).map(|info| &info.kind) {
                Some(TypeKind::Domain {
                    base,
                    type_modifier,
                }) => {
                    resolved = Resolved {
                        oid: *base,
                        type_modifier: *type_modifier,
                    };
                }
                _ => return Some(resolved),
            }
        }
        None
    }

    /// The name used in messages: a builtin's short name (`int4`, `_text`), a described
    /// type's SQL spelling with its kind when that helps (`money12 (domain over numeric)`,
    /// `mood (enum)`), or `oid 16384` for a type the catalog was not asked about.
    pub fn name(&self, oid: u32) -> Cow<'static, str> {
        if oid::is_builtin(oid) {
            return oid::name(oid);
        }
        let Some(info) = self.get(oid) else {
            return oid::name(oid);
        };
        Cow::Owned(match &info.kind {
            TypeKind::Domain { .. } => match self.resolve(oid, -1) {
                Some(base) => format!("{} (domain over {})", info.name, self.name(base.oid)),
                None => format!("{} (domain)", info.name),
            },
            TypeKind::Composite { .. } => format!("{} (composite)", info.name),
            TypeKind::Opaque { what } => format!("{} ({what})", info.name),
            TypeKind::Array { .. } | TypeKind::Text => info.name.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domain(name: &str, base: u32, type_modifier: i32) -> TypeInfo {
        TypeInfo {
            name: name.into(),
            kind: TypeKind::Domain {
                base,
                type_modifier,
            },
        }
    }

    #[test]
    fn domains_resolve_to_the_innermost_domains_modifier() {
        let mut types = PgTypes::new();
        types.insert(16490, domain("money12", oid::NUMERIC, 786_438));
        types.insert(16492, domain("money12b", 16490, -1));
        let base = |oid| types.resolve(oid, -1).map(|r| (r.oid, r.type_modifier));
        assert_eq!(base(16492), Some((oid::NUMERIC, 786_438)));
        assert_eq!(base(16490), Some((oid::NUMERIC, 786_438)));
        assert_eq!(
            types.resolve(oid::VARCHAR, 14).map(|r| r.type_modifier),
            Some(14)
        );
        assert_eq!(
            base(77),
            Some((77, -1)),
            "a type not described is its own base"
        );
        assert_eq!(types.name(16492), "money12b (domain over numeric)");
    }

    #[test]
    fn a_cycle_in_a_catalog_answer_resolves_to_nothing_instead_of_looping() {
        let mut types = PgTypes::new();
        types.insert(1, domain("a", 2, -1));
        types.insert(2, domain("b", 1, -1));
        assert_eq!(types.resolve(1, -1), None);
        assert_eq!(types.name(1), "a (domain)");
    }

    #[test]
    fn builtins_keep_their_short_names_whatever_the_catalog_says() {
        let mut types = PgTypes::new();
        types.insert(
            oid::INT4,
            TypeInfo {
                name: "integer".into(),
                kind: TypeKind::Opaque { what: "base type" },
            },
        );
        assert_eq!(types.name(oid::INT4), "int4");
        assert_eq!(types.name(16384), "oid 16384");
    }
}
