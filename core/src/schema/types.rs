//! Feldera's column types, as its program schema describes them.
//!
//! This is the vocabulary shared by the schema parser (`schema::program`), the column
//! mapping (`contract::mapping`) and the value decoders (`value`).

use std::fmt;

/// A Feldera SQL type name (the `type` of a `columntype`). Struct types have no name in
/// the schema (only `fields`); they are `Struct` here.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SqlType {
    Boolean,
    TinyInt,
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    Decimal,
    Char,
    Varchar,
    Binary,
    Varbinary,
    Time,
    Date,
    Timestamp,
    TimestampTz,
    Uuid,
    Variant,
    Array,
    Map,
    Struct,
}

impl SqlType {
    /// Every named type with its spelling in Feldera's schema JSON.
    pub const NAMED: [(SqlType, &'static str); 20] = [
        (SqlType::Boolean, "BOOLEAN"),
        (SqlType::TinyInt, "TINYINT"),
        (SqlType::SmallInt, "SMALLINT"),
        (SqlType::Integer, "INTEGER"),
        (SqlType::BigInt, "BIGINT"),
        (SqlType::Real, "REAL"),
        (SqlType::Double, "DOUBLE"),
        (SqlType::Decimal, "DECIMAL"),
        (SqlType::Char, "CHAR"),
        (SqlType::Varchar, "VARCHAR"),
        (SqlType::Binary, "BINARY"),
        (SqlType::Varbinary, "VARBINARY"),
        (SqlType::Time, "TIME"),
        (SqlType::Date, "DATE"),
        (SqlType::Timestamp, "TIMESTAMP"),
        (SqlType::TimestampTz, "TIMESTAMP_TZ"),
        (SqlType::Uuid, "UUID"),
        (SqlType::Variant, "VARIANT"),
        (SqlType::Array, "ARRAY"),
        (SqlType::Map, "MAP"),
    ];

    /// Parses a schema type name, case-insensitively (Feldera's own parser accepts both).
    pub fn from_name(name: &str) -> Option<SqlType> {
        Self::NAMED
            .iter()
            .find(|(_, spelled)| spelled.eq_ignore_ascii_case(name))
            .map(|(ty, _)| *ty)
    }

    pub fn name(self) -> &'static str {
        Self::NAMED
            .iter()
            .find(|(ty, _)| *ty == self)
            .map_or("STRUCT", |(_, spelled)| spelled)
    }
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An identifier from Feldera's schema: unquoted names were folded to lowercase by Feldera
/// and match case-insensitively; quoted names (`case_sensitive: true`) match exactly.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Name {
    pub name: String,
    pub case_sensitive: bool,
}

impl Name {
    pub fn unquoted(name: &str) -> Name {
        Name {
            name: name.to_owned(),
            case_sensitive: false,
        }
    }

    pub fn quoted(name: &str) -> Name {
        Name {
            name: name.to_owned(),
            case_sensitive: true,
        }
    }

    /// Whether `other` (a name spelled by someone else) refers to this one.
    pub fn matches(&self, other: &str) -> bool {
        if self.case_sensitive {
            self.name == other
        } else {
            self.name.eq_ignore_ascii_case(other)
        }
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.case_sensitive {
            write!(f, "\"{}\"", self.name.replace('"', "\"\""))
        } else {
            f.write_str(&self.name)
        }
    }
}

/// A column's type: the `columntype` object of Feldera's schema.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ColumnType {
    pub sql: SqlType,
    pub nullable: bool,
    /// Length for CHAR/VARCHAR/BINARY/VARBINARY (`-1` = unlimited), digits for DECIMAL,
    /// fractional-second digits for TIME/TIMESTAMP where Feldera reports them.
    pub precision: Option<i64>,
    /// DECIMAL scale.
    pub scale: Option<i64>,
    /// ARRAY element type.
    pub component: Option<Box<ColumnType>>,
    /// MAP key and value types.
    pub key: Option<Box<ColumnType>>,
    pub value: Option<Box<ColumnType>>,
    /// Struct fields (SqlType::Struct only).
    pub fields: Vec<Field>,
}

impl ColumnType {
    pub fn new(sql: SqlType, nullable: bool) -> ColumnType {
        ColumnType {
            sql,
            nullable,
            precision: None,
            scale: None,
            component: None,
            key: None,
            value: None,
            fields: Vec::new(),
        }
    }

    pub fn with_precision(mut self, precision: i64) -> ColumnType {
        self.precision = Some(precision);
        self
    }

    pub fn decimal(precision: i64, scale: i64, nullable: bool) -> ColumnType {
        ColumnType {
            precision: Some(precision),
            scale: Some(scale),
            ..ColumnType::new(SqlType::Decimal, nullable)
        }
    }

    pub fn array_of(component: ColumnType, nullable: bool) -> ColumnType {
        ColumnType {
            component: Some(Box::new(component)),
            ..ColumnType::new(SqlType::Array, nullable)
        }
    }
}

impl fmt::Display for ColumnType {
    /// Prints the type as SQL would spell it (`DECIMAL(10, 2)`, `VARCHAR ARRAY`, `BIGINT NOT NULL`,
    /// `ROW(street VARCHAR, zip INTEGER NOT NULL)`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.sql, &self.component) {
            (SqlType::Array, Some(component)) => write!(
                f,
                "{} ARRAY",
                ColumnType {
                    nullable: true,
                    ..(**component).clone()
                }
            )?,
            (SqlType::Decimal, _) => match (self.precision, self.scale) {
                (Some(p), Some(s)) => write!(f, "DECIMAL({p}, {s})")?,
                _ => f.write_str("DECIMAL")?,
            },
            (SqlType::Struct, _) => {
                f.write_str("ROW(")?;
                for (i, field) in self.fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{} {}", field.name, field.columntype)?;
                }
                f.write_str(")")?;
            }
            (SqlType::Char | SqlType::Varchar | SqlType::Binary | SqlType::Varbinary, _) => {
                match self.precision {
                    Some(p) if p >= 0 => write!(f, "{}({p})", self.sql)?,
                    _ => write!(f, "{}", self.sql)?,
                }
            }
            (sql, _) => write!(f, "{sql}")?,
        }
        if !self.nullable {
            f.write_str(" NOT NULL")?;
        }
        Ok(())
    }
}

/// A named, typed field of a table or struct.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Field {
    pub name: Name,
    pub columntype: ColumnType,
    /// The SQL text of the column's DEFAULT (`'1.0E0'`, `'x'`), as the compiler writes it.
    /// Feldera gives a column missing from an ingested row this value, not NULL.
    pub default: Option<String>,
    /// The SQL text of the column's LATENESS, when it has one.
    pub lateness: Option<String>,
}

impl Field {
    /// A field without a DEFAULT or LATENESS.
    pub fn new(name: Name, columntype: ColumnType) -> Field {
        Field {
            name,
            columntype,
            default: None,
            lateness: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_names_parse_case_insensitively_and_print_canonically() {
        assert_eq!(
            SqlType::from_name("timestamp_tz"),
            Some(SqlType::TimestampTz)
        );
        assert_eq!(SqlType::from_name("BIGINT"), Some(SqlType::BigInt));
        assert_eq!(SqlType::from_name("INTERVAL"), None);
        for (ty, name) in SqlType::NAMED {
            assert_eq!(SqlType::from_name(name), Some(ty));
            assert_eq!(ty.to_string(), name);
        }
    }

    #[test]
    fn names_match_by_case_sensitivity() {
        assert!(Name::unquoted("id").matches("ID"));
        assert!(!Name::quoted("Id").matches("id"));
        assert!(Name::quoted("Id").matches("Id"));
        assert_eq!(Name::quoted("Ta\"B").to_string(), "\"Ta\"\"B\"");
    }

    #[test]
    fn column_types_print_as_sql() {
        assert_eq!(
            ColumnType::decimal(10, 2, true).to_string(),
            "DECIMAL(10, 2)"
        );
        let tags = ColumnType::array_of(
            ColumnType::new(SqlType::Varchar, true).with_precision(-1),
            false,
        );
        assert_eq!(tags.to_string(), "VARCHAR ARRAY NOT NULL");
        assert_eq!(
            ColumnType::new(SqlType::Char, true)
                .with_precision(3)
                .to_string(),
            "CHAR(3)"
        );
        let row = ColumnType {
            fields: vec![
                Field::new(
                    Name::unquoted("street"),
                    ColumnType::new(SqlType::Varchar, true),
                ),
                Field::new(
                    Name::quoted("Zip"),
                    ColumnType::new(SqlType::Integer, false),
                ),
            ],
            ..ColumnType::new(SqlType::Struct, false)
        };
        assert_eq!(
            ColumnType::array_of(row, true).to_string(),
            "ROW(street VARCHAR, \"Zip\" INTEGER NOT NULL) ARRAY"
        );
    }
}
