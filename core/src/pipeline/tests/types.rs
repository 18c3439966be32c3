//! Column types the catalog describes (domains, composites): asked once at startup, only
//! when a routed column has one, and used for every Relation of the session.
use super::*;
use crate::Lsn;
use serde_json::json;

/// `accounts (id int8, balance money12, home addr, tags mood[])`: a domain over
/// numeric(12,2), a composite `(street text, zip int4)` and an array of an enum.
fn accounts() -> FakeTable {
    FakeTable::new(
        16500,
        "accounts",
        ReplicaIdentity::Default,
        &[
            ("id", 20, true),
            ("balance", 90_001, false),
            ("home", 90_010, false),
            ("tags", 90_007, false),
        ],
    )
}

/// The catalog's answer about those types (`catalog::types`), as PostgreSQL gives it.
fn types_answer() -> Vec<Vec<Option<String>>> {
    [
        "23|integer|b||||-1|||||",
        "25|text|b||||-1|||||",
        "1700|numeric|b||||-1|||||",
        "90001|money12|d|||1700|786438|||||",
        "90006|mood|e||||-1|||||",
        "90007|mood[]|b|90006|,||-1|||||",
        "90010|addr|c||||-1|||||",
        "90010||||||||1|street|25|-1",
        "90010||||||||2|zip|23|-1",
    ]
    .iter()
    .map(|line| {
        line.split('|')
            .map(|c| (!c.is_empty()).then(|| c.to_owned()))
            .collect()
    })
    .collect()
}

fn schema(home: &str) -> String {
    format!(
        r#"{{"inputs":[
 {{"name":"accounts","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{{}},
  "fields":[{{"name":"id","case_sensitive":false,"columntype":{{"type":"BIGINT","nullable":false}}}},
            {{"name":"balance","case_sensitive":false,"columntype":{{"type":"DECIMAL","nullable":true,"precision":12,"scale":2}}}},
            {{"name":"home","case_sensitive":false,"columntype":{{"nullable":true,"fields":[{home}]}}}},
            {{"name":"tags","case_sensitive":false,"columntype":{{"type":"ARRAY","nullable":true,"component":{{"type":"VARCHAR","nullable":true,"precision":-1}}}}}}]}}
],"outputs":[]}}"#
    )
}

const HOME: &str = r#"{"name":"street","type":"VARCHAR","nullable":true,"precision":-1},
                     {"name":"zip","type":"INTEGER","nullable":true}"#;

fn database() -> FakePg {
    let mut pg = pg();
    pg.tables = vec![accounts()];
    pg.truncate_published = false;
    pg
}

fn start(schema: &str) -> Script {
    Script::new_tweaked(
        &[("TABLES", "accounts"), ("BATCH_LINGER_MS", "0")],
        database(),
        schema,
        |s| s.types_answer = types_answer(),
    )
}

#[test]
fn a_domain_a_composite_and_an_enum_array_are_read_from_the_catalog_and_sent_typed() {
    let mut s = start(&schema(HOME));
    let startup = s.take_trace();
    assert!(startup.contains("query <column types>"), "{startup}");
    assert!(startup.contains("START_REPLICATION"), "{startup}");
    s.wal("Relation accounts", &[relation(&accounts())]);
    s.wal(
        "tx: insert into accounts",
        &[
            begin(0x2100, 700),
            insert(
                0x2010,
                16500,
                &[
                    Some("1"),
                    Some("12.50"),
                    Some(r#"("Main ""St"", 1\\2",12345)"#),
                    Some(r#"{sad,"very happy",NULL}"#),
                ],
            ),
            insert(0x2018, 16500, &[Some("2"), None, Some("(,)"), Some("{}")]),
            commit(0x20F8, 0x2100),
        ],
    );
    let bodies = s.pending_bodies().join("");
    s.settle();
    rule!(
        "A domain column is sent as its base type (numeric(12,2) into DECIMAL(12, 2)), a composite as an object keyed by the ROW's members, an enum array as a VARCHAR array; the types come from one catalog question asked at startup because a routed column is not builtin.",
        bodies
    );
}

#[test]
fn a_start_whose_columns_are_all_builtin_asks_no_type_question() {
    let mut pg = pg();
    pg.slot_confirmed = None;
    let mut s = Script::new(&[TABLES], pg, SCHEMA);
    let trace = s.take_trace();
    assert!(trace.contains("START_REPLICATION"), "{trace}");
    assert!(!trace.contains("<column types>"), "{trace}");
}

#[test]
fn a_row_whose_members_differ_is_refused_before_the_slot_exists_naming_the_member() {
    let renamed = r#"{"name":"street","type":"VARCHAR","nullable":true,"precision":-1},
                     {"name":"postcode","type":"INTEGER","nullable":true}"#;
    let mut s = start(&schema(renamed));
    let trace = s.take_trace();
    assert!(!trace.contains("CREATE_REPLICATION_SLOT"), "{trace}");
    assert!(!trace.contains("START_REPLICATION"), "{trace}");
    assert_eq!(s.exit().map(|e| e.0), Some(1));
    rule!(
        "A composite column whose ROW members differ from the type's is refused at start, naming the table, the column, the member and what is accepted.",
        s.exit().map(|e| e.1.clone()).unwrap_or_default()
    );
}

/// `accounts` with balance of type 90099, which the start's catalog did not describe.
fn accounts_with_new_type() -> FakeTable {
    let mut changed = accounts();
    if let Some(balance) = changed.relation.columns.get_mut(1) {
        balance.type_oid = 90_099;
    }
    changed
}

/// A transaction that announces `accounts_with_new_type` and inserts a row of it.
fn insert_with_new_type(s: &mut Script) {
    s.wal(
        "tx 9: Relation accounts (balance now of a type created since), insert",
        &[
            begin(0x2100, 9),
            relation(&accounts_with_new_type()),
            insert(
                0x2010,
                16500,
                &[Some("1"), Some("7.25"), Some("(,)"), Some("{}")],
            ),
            commit(0x20F8, 0x2100),
        ],
    );
}

#[test]
fn a_relation_with_a_type_created_since_the_catalog_was_read_reads_it_again_and_delivers() {
    let mut s = start(&schema(HOME));
    s.take_trace();
    s.change_catalog(
        "CREATE DOMAIN money12b AS numeric(12,2); ALTER TABLE accounts ALTER balance TYPE money12b",
        |pg| pg.tables[0] = accounts_with_new_type(),
    );
    s.types_answer.push(
        "90099|money12b|d|||1700|786438|||||"
            .split('|')
            .map(|c| (!c.is_empty()).then(|| c.to_owned()))
            .collect(),
    );
    insert_with_new_type(&mut s);
    assert_eq!(s.exit(), None, "the session ends, the process does not");
    assert_eq!(
        s.confirmed, START,
        "nothing of the transaction acknowledged"
    );
    s.advance(200);
    insert_with_new_type(&mut s);
    s.settle();
    assert_eq!(s.exit(), None);
    assert_eq!(s.confirmed, Lsn(0x2100));
    assert_eq!(
        s.feldera.contents("accounts"),
        [json!({"id": 1, "balance": "7.25", "home": {"street": null, "zip": null}, "tags": []})]
    );
    rule!(
        "A Relation of a routed table names a column type the session's catalog does not describe (a domain created mid-stream): the session ends without acknowledging, the next one reads the catalog (and its types) again, and the replayed row is delivered typed.",
        s.take_trace()
    );
}

#[test]
fn a_type_still_unknown_after_reading_the_catalog_again_exits_1() {
    let mut s = start(&schema(HOME));
    s.take_trace();
    insert_with_new_type(&mut s);
    assert_eq!(s.exit(), None, "first, the catalog is read again");
    s.advance(200);
    insert_with_new_type(&mut s);
    assert_eq!(s.exit().map(|e| e.0), Some(1), "{}", s.take_trace());
    let message = s.exit().map(|e| e.1.clone()).unwrap_or_default();
    assert!(
        message.contains(
            "oid 90099 is accepted by VARCHAR only: the catalog slotline read does not describe it"
        ),
        "{message}"
    );
    assert_eq!(s.confirmed, START);
}
