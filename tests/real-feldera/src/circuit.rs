//! The circuit Feldera's SQL compiler would emit for `tests/fixtures/feldera-server.schema.json`:
//!
//! ```sql
//! CREATE TABLE users (id BIGINT NOT NULL PRIMARY KEY, name VARCHAR, score DOUBLE,
//!     active BOOLEAN NOT NULL, joined TIMESTAMP) WITH ('materialized' = 'true');
//! CREATE TABLE lines (order_id BIGINT NOT NULL, line INT NOT NULL, sku VARCHAR NOT NULL,
//!     qty INT NOT NULL, price DECIMAL(10, 2), day DATE,
//!     PRIMARY KEY (order_id, line)) WITH ('materialized' = 'true');
//! ```
//!
//! written by hand after the compiler's Rust backend (`ToRustVisitor.preorder(DBSPSourceMapOperator)`,
//! `sourceMapPostfix`, `ToRustInnerVisitor.generateSerdeMacros` and `generateFromTrait`):
//!
//! - each keyed table is `add_input_map_persistent::<K, V, U, _>` whose patch function copies
//!   every present non-key member of the upsert tuple into the row;
//! - the row, key and upsert tuples (`Tup*`) each have a struct twin that carries the
//!   column names, with `From` both ways, and `deserialize_table_record!` /
//!   `serialize_table_record!` over it (aux type `Variant`; a nullable column's missing value
//!   is `Some(None)`, an upsert's missing member `Some(None)` too, and a nullable upsert
//!   member's explicit `null` becomes `Some(None)` by the post-processing closure);
//! - `catalog.register_materialized_input_map::<K, KD, V, VD, U, UD, _, _>` with the table's
//!   schema JSON, which makes the table both an output and queryable by ad-hoc SQL.

use dbsp::utils::{Tup1, Tup2, Tup5, Tup6};
use dbsp::{DBSPHandle, RootCircuit};
use dbsp_adapters::{Catalog, CircuitCatalog, ControllerError};
use feldera_sqllib::{Date, SqlDecimal, SqlString, Timestamp, Variant, F64};
use feldera_types::{deserialize_table_record, serialize_table_record};

/// The schema the circuit implements, as `program_info.schema` carries it.
pub const SCHEMA_JSON: &str = include_str!("../../fixtures/feldera-server.schema.json");

/// The relation named `name` of [`SCHEMA_JSON`], as the compiler passes it to the catalog.
fn relation_json(name: &str) -> String {
    let schema: serde_json::Value = serde_json::from_str(SCHEMA_JSON).expect("schema JSON");
    let relation = schema["inputs"]
        .as_array()
        .and_then(|inputs| inputs.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("no relation {name} in the schema"));
    relation.to_string()
}

type Price = SqlDecimal<10, 2>;

type UsersRow = Tup5<i64, Option<SqlString>, Option<F64>, bool, Option<Timestamp>>;
type UsersKey = Tup1<i64>;
type UsersUpsert = Tup5<
    Option<i64>,
    Option<Option<SqlString>>,
    Option<Option<F64>>,
    Option<bool>,
    Option<Option<Timestamp>>,
>;

type LinesRow = Tup6<i64, i32, SqlString, i32, Option<Price>, Option<Date>>;
type LinesKey = Tup2<i64, i32>;
type LinesUpsert = Tup6<
    Option<i64>,
    Option<i32>,
    Option<SqlString>,
    Option<i32>,
    Option<Option<Price>>,
    Option<Option<Date>>,
>;

#[derive(Clone, Debug, Default)]
pub struct Users {
    id: i64,
    name: Option<SqlString>,
    score: Option<F64>,
    active: bool,
    joined: Option<Timestamp>,
}

deserialize_table_record!(Users["users", Variant, 5] {
    (id, "id", false, i64, |_| None),
    (name, "name", false, Option<SqlString>, |_| Some(None)),
    (score, "score", false, Option<F64>, |_| Some(None)),
    (active, "active", false, bool, |_| None),
    (joined, "joined", false, Option<Timestamp>, |_| Some(None))
});
serialize_table_record!(Users[5] {
    id["id"]: i64,
    name["name"]: Option<SqlString>,
    score["score"]: Option<F64>,
    active["active"]: bool,
    joined["joined"]: Option<Timestamp>
});

impl From<Users> for UsersRow {
    fn from(t: Users) -> Self {
        Tup5::new(t.id, t.name, t.score, t.active, t.joined)
    }
}

impl From<UsersRow> for Users {
    fn from(t: UsersRow) -> Self {
        Users {
            id: t.0,
            name: t.1,
            score: t.2,
            active: t.3,
            joined: t.4,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct UsersKeyStruct {
    id: i64,
}

deserialize_table_record!(UsersKeyStruct["users_key", Variant, 1] {
    (id, "id", false, i64, |_| None)
});
serialize_table_record!(UsersKeyStruct[1] {
    id["id"]: i64
});

impl From<UsersKeyStruct> for UsersKey {
    fn from(t: UsersKeyStruct) -> Self {
        Tup1::new(t.id)
    }
}

impl From<UsersKey> for UsersKeyStruct {
    fn from(t: UsersKey) -> Self {
        UsersKeyStruct { id: t.0 }
    }
}

#[derive(Clone, Debug, Default)]
pub struct UsersUpsertStruct {
    id: Option<i64>,
    name: Option<Option<SqlString>>,
    score: Option<Option<F64>>,
    active: Option<bool>,
    joined: Option<Option<Timestamp>>,
}

deserialize_table_record!(UsersUpsertStruct["users_upsert", Variant, 5] {
    (id, "id", false, Option<i64>, |_| Some(None)),
    (name, "name", false, Option<Option<SqlString>>, |_| Some(None), |x| if x.is_none() { Some(None) } else { x }),
    (score, "score", false, Option<Option<F64>>, |_| Some(None), |x| if x.is_none() { Some(None) } else { x }),
    (active, "active", false, Option<bool>, |_| Some(None)),
    (joined, "joined", false, Option<Option<Timestamp>>, |_| Some(None), |x| if x.is_none() { Some(None) } else { x })
});
serialize_table_record!(UsersUpsertStruct[5] {
    id["id"]: Option<i64>,
    name["name"]: Option<Option<SqlString>>,
    score["score"]: Option<Option<F64>>,
    active["active"]: Option<bool>,
    joined["joined"]: Option<Option<Timestamp>>
});

impl From<UsersUpsertStruct> for UsersUpsert {
    fn from(t: UsersUpsertStruct) -> Self {
        Tup5::new(t.id, t.name, t.score, t.active, t.joined)
    }
}

impl From<UsersUpsert> for UsersUpsertStruct {
    fn from(t: UsersUpsert) -> Self {
        UsersUpsertStruct {
            id: t.0,
            name: t.1,
            score: t.2,
            active: t.3,
            joined: t.4,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Lines {
    order_id: i64,
    line: i32,
    sku: SqlString,
    qty: i32,
    price: Option<Price>,
    day: Option<Date>,
}

deserialize_table_record!(Lines["lines", Variant, 6] {
    (order_id, "order_id", false, i64, |_| None),
    (line, "line", false, i32, |_| None),
    (sku, "sku", false, SqlString, |_| None),
    (qty, "qty", false, i32, |_| None),
    (price, "price", false, Option<Price>, |_| Some(None)),
    (day, "day", false, Option<Date>, |_| Some(None))
});
serialize_table_record!(Lines[6] {
    order_id["order_id"]: i64,
    line["line"]: i32,
    sku["sku"]: SqlString,
    qty["qty"]: i32,
    price["price"]: Option<Price>,
    day["day"]: Option<Date>
});

impl From<Lines> for LinesRow {
    fn from(t: Lines) -> Self {
        Tup6::new(t.order_id, t.line, t.sku, t.qty, t.price, t.day)
    }
}

impl From<LinesRow> for Lines {
    fn from(t: LinesRow) -> Self {
        Lines {
            order_id: t.0,
            line: t.1,
            sku: t.2,
            qty: t.3,
            price: t.4,
            day: t.5,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct LinesKeyStruct {
    order_id: i64,
    line: i32,
}

deserialize_table_record!(LinesKeyStruct["lines_key", Variant, 2] {
    (order_id, "order_id", false, i64, |_| None),
    (line, "line", false, i32, |_| None)
});
serialize_table_record!(LinesKeyStruct[2] {
    order_id["order_id"]: i64,
    line["line"]: i32
});

impl From<LinesKeyStruct> for LinesKey {
    fn from(t: LinesKeyStruct) -> Self {
        Tup2::new(t.order_id, t.line)
    }
}

impl From<LinesKey> for LinesKeyStruct {
    fn from(t: LinesKey) -> Self {
        LinesKeyStruct {
            order_id: t.0,
            line: t.1,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct LinesUpsertStruct {
    order_id: Option<i64>,
    line: Option<i32>,
    sku: Option<SqlString>,
    qty: Option<i32>,
    price: Option<Option<Price>>,
    day: Option<Option<Date>>,
}

deserialize_table_record!(LinesUpsertStruct["lines_upsert", Variant, 6] {
    (order_id, "order_id", false, Option<i64>, |_| Some(None)),
    (line, "line", false, Option<i32>, |_| Some(None)),
    (sku, "sku", false, Option<SqlString>, |_| Some(None)),
    (qty, "qty", false, Option<i32>, |_| Some(None)),
    (price, "price", false, Option<Option<Price>>, |_| Some(None), |x| if x.is_none() { Some(None) } else { x }),
    (day, "day", false, Option<Option<Date>>, |_| Some(None), |x| if x.is_none() { Some(None) } else { x })
});
serialize_table_record!(LinesUpsertStruct[6] {
    order_id["order_id"]: Option<i64>,
    line["line"]: Option<i32>,
    sku["sku"]: Option<SqlString>,
    qty["qty"]: Option<i32>,
    price["price"]: Option<Option<Price>>,
    day["day"]: Option<Option<Date>>
});

impl From<LinesUpsertStruct> for LinesUpsert {
    fn from(t: LinesUpsertStruct) -> Self {
        Tup6::new(t.order_id, t.line, t.sku, t.qty, t.price, t.day)
    }
}

impl From<LinesUpsert> for LinesUpsertStruct {
    fn from(t: LinesUpsert) -> Self {
        LinesUpsertStruct {
            order_id: t.0,
            line: t.1,
            sku: t.2,
            qty: t.3,
            price: t.4,
            day: t.5,
        }
    }
}

/// Registers both tables in a fresh catalog, as the compiled `circuit` function's closure does.
fn build(circuit: &mut RootCircuit) -> Result<Catalog, anyhow::Error> {
    let mut catalog = Catalog::new();

    let (users, users_handle) = circuit
        .add_input_map_persistent::<UsersKey, UsersRow, UsersUpsert, _>(
            Some("users"),
            |updated: &mut UsersRow, changes: &UsersUpsert| {
                if let Some(name) = &changes.1 {
                    updated.1 = name.clone();
                }
                if let Some(score) = &changes.2 {
                    updated.2 = *score;
                }
                if let Some(active) = &changes.3 {
                    updated.3 = *active;
                }
                if let Some(joined) = &changes.4 {
                    updated.4 = *joined;
                }
            },
        );
    users.set_persistent_id(Some("users"));
    catalog.register_materialized_input_map::<
        UsersKey,
        UsersKeyStruct,
        UsersRow,
        Users,
        UsersUpsert,
        UsersUpsertStruct,
        _,
        _,
    >(
        users.clone(),
        users_handle,
        |row: &UsersRow| Tup1::new(row.0),
        |upsert: &UsersUpsert| Tup1::new(upsert.0.unwrap()),
        &relation_json("users"),
    );

    let (lines, lines_handle) = circuit
        .add_input_map_persistent::<LinesKey, LinesRow, LinesUpsert, _>(
            Some("lines"),
            |updated: &mut LinesRow, changes: &LinesUpsert| {
                if let Some(sku) = &changes.2 {
                    updated.2 = sku.clone();
                }
                if let Some(qty) = &changes.3 {
                    updated.3 = *qty;
                }
                if let Some(price) = &changes.4 {
                    updated.4 = *price;
                }
                if let Some(day) = &changes.5 {
                    updated.5 = *day;
                }
            },
        );
    lines.set_persistent_id(Some("lines"));
    catalog.register_materialized_input_map::<
        LinesKey,
        LinesKeyStruct,
        LinesRow,
        Lines,
        LinesUpsert,
        LinesUpsertStruct,
        _,
        _,
    >(
        lines.clone(),
        lines_handle,
        |row: &LinesRow| Tup2::new(row.0, row.1),
        |upsert: &LinesUpsert| Tup2::new(upsert.0.unwrap(), upsert.1.unwrap()),
        &relation_json("lines"),
    );

    Ok(catalog)
}

/// The circuit and its catalog, built through `dbsp_adapters::server::init_circuit` as
/// compiled programs build theirs.
pub fn circuit(
    config: dbsp::circuit::CircuitConfig,
) -> Result<(DBSPHandle, Box<dyn CircuitCatalog>), ControllerError> {
    let (handle, catalog) = dbsp_adapters::server::init_circuit(config, Box::new(build))
        .map_err(ControllerError::dbsp_error)?;
    Ok((handle, Box::new(catalog)))
}
