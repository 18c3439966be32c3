//! Decode + JSON encode throughput: the work the pipeline does for every streamed row.
//!
//! One iteration takes a pgoutput Insert payload as it arrives in XLogData, parses it,
//! checks it against the relation cache, and writes its `{"insert": {...}}` NDJSON line
//! through the column mapping's value plans. Two shapes: a narrow row (int8, text,
//! timestamptz) and a wide one (20 columns of mixed types). A second group does the same
//! for the initial snapshot: one COPY text row (as a CopyData message carries it) parsed by
//! `CopyRow` and written as an insert line by `Converter::snapshot_row`. Run with
//! `cargo bench -p slotline-core --bench decode`; figures go in BENCHMARKS.md.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use slotline_core::contract::{plan_mapping, ColumnMapping, MappingOptions};
use slotline_core::convert::Converter;
use slotline_core::copy::{encode_row, CopyRow};
use slotline_core::pgoutput::encode::{insert, row};
use slotline_core::pgoutput::{
    parse, Datum, Message, Relation, RelationCache, RelationColumn, ReplicaIdentity,
};
use slotline_core::schema::{ColumnType, Field, Name, SqlType, Table};
use slotline_core::value::oid;
use slotline_core::value::PgTypes;

/// One column: name, PostgreSQL type, Feldera type, and the text PostgreSQL would send.
struct Column {
    name: &'static str,
    pg_type: u32,
    target: ColumnType,
    text: Option<&'static str>,
}

fn col(name: &'static str, pg_type: u32, sql: SqlType, text: Option<&'static str>) -> Column {
    Column {
        name,
        pg_type,
        target: ColumnType::new(sql, name != "id"),
        text,
    }
}

fn narrow() -> Vec<Column> {
    vec![
        col("id", oid::INT8, SqlType::BigInt, Some("1234567890")),
        col("name", oid::TEXT, SqlType::Varchar, Some("a customer name")),
        col(
            "at",
            oid::TIMESTAMPTZ,
            SqlType::Timestamp,
            Some("2024-03-10 10:34:56.789012+00"),
        ),
    ]
}

fn wide() -> Vec<Column> {
    let mut amount = col("amount", oid::NUMERIC, SqlType::Decimal, Some("12345.67"));
    amount.target = ColumnType::decimal(12, 2, true);
    let tags = Column {
        name: "tags",
        pg_type: 1009,
        target: ColumnType::array_of(ColumnType::new(SqlType::Varchar, true), true),
        text: Some(r#"{red,green,"light blue"}"#),
    };
    vec![
        col("id", oid::INT8, SqlType::BigInt, Some("1234567890")),
        col("active", oid::BOOL, SqlType::Boolean, Some("t")),
        col("small", oid::INT2, SqlType::SmallInt, Some("-123")),
        col("count", oid::INT4, SqlType::Integer, Some("987654")),
        col("ratio", oid::FLOAT4, SqlType::Real, Some("0.333333343")),
        col(
            "score",
            oid::FLOAT8,
            SqlType::Double,
            Some("2.718281828459045"),
        ),
        amount,
        col("name", oid::TEXT, SqlType::Varchar, Some("a customer name")),
        col(
            "note",
            oid::TEXT,
            SqlType::Varchar,
            Some("a \"quoted\" note with a tab\there and é"),
        ),
        col("code", oid::VARCHAR, SqlType::Varchar, Some("ABC-123")),
        col("born", oid::DATE, SqlType::Date, Some("1990-07-14")),
        col("opens", oid::TIME, SqlType::Time, Some("09:30:00")),
        col(
            "created",
            oid::TIMESTAMP,
            SqlType::Timestamp,
            Some("2024-03-10 12:34:56.789"),
        ),
        col(
            "updated",
            oid::TIMESTAMPTZ,
            SqlType::TimestampTz,
            Some("2024-03-10 10:34:56.789012+00"),
        ),
        col(
            "uid",
            oid::UUID,
            SqlType::Uuid,
            Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        ),
        col(
            "doc",
            oid::JSONB,
            SqlType::Variant,
            Some(r#"{"a": 1, "b": [true, null, "x"]}"#),
        ),
        col(
            "blob",
            oid::BYTEA,
            SqlType::Varbinary,
            Some("\\xdeadbeef0102"),
        ),
        tags,
        col("mood", 16_385, SqlType::Varchar, Some("happy")),
        col("missing", oid::TEXT, SqlType::Varchar, None),
    ]
}

/// The relation, its mapping onto a Feldera table of the same columns, and one Insert
/// payload as the server would send it.
fn setup(columns: &[Column]) -> (Relation, ColumnMapping, Vec<u8>) {
    let relation = Relation {
        oid: 16_400,
        namespace: "public".into(),
        name: "t".into(),
        replica_identity: ReplicaIdentity::Default,
        columns: columns
            .iter()
            .map(|c| RelationColumn {
                in_replica_identity: c.name == "id",
                name: c.name.into(),
                type_oid: c.pg_type,
                type_modifier: -1,
            })
            .collect(),
    };
    let table = Table {
        name: Name::unquoted("t"),
        fields: columns
            .iter()
            .map(|c| Field::new(Name::unquoted(c.name), c.target.clone()))
            .collect(),
        primary_key: Some(vec![Name::unquoted("id")]),
        materialized: false,
    };
    let mapping = plan_mapping(
        &relation,
        &table,
        &PgTypes::new(),
        MappingOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let texts: Vec<Option<&str>> = columns.iter().map(|c| c.text).collect();
    let payload = insert(relation.oid, row(&texts));
    (relation, mapping, payload)
}

/// Parse, check and encode one row; returns the line length so nothing is optimised away.
fn decode_row(
    cache: &RelationCache,
    mapping: &ColumnMapping,
    payload: &[u8],
    line: &mut Vec<u8>,
) -> usize {
    line.clear();
    let message = parse(payload).expect("a valid Insert");
    cache.check(&message).expect("matches its relation");
    let Message::Insert(insert) = message else {
        panic!("not an Insert");
    };
    line.extend_from_slice(b"{\"insert\":{");
    let mut first = true;
    for field in &mapping.fields {
        let Some(source) = &field.source else {
            continue;
        };
        if !first {
            line.push(b',');
        }
        first = false;
        line.extend_from_slice(field.json_key.as_bytes());
        line.push(b':');
        let datum = match insert.new.get(source.column) {
            Some(Datum::Text(text)) => Some(*text),
            _ => None,
        };
        source.plan.write_datum(datum, line).expect("valid value");
    }
    line.extend_from_slice(b"}}\n");
    line.len()
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("pgoutput_decode_json");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
        .throughput(Throughput::Elements(1));
    for (shape, columns) in [("narrow_3_columns", narrow()), ("wide_20_columns", wide())] {
        let (relation, mapping, payload) = setup(&columns);
        let mut cache = RelationCache::new();
        cache.apply(relation);
        let mut line = Vec::with_capacity(1024);
        // The line must be valid JSON before it is worth timing.
        decode_row(&cache, &mapping, &payload, &mut line);
        serde_json::from_slice::<serde_json::Value>(&line).expect("valid JSON line");
        group.bench_function(shape, |b| {
            b.iter(|| decode_row(&cache, &mapping, black_box(&payload), &mut line))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("copy_row_json");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
        .throughput(Throughput::Elements(1));
    for (shape, columns) in [("narrow_3_columns", narrow()), ("wide_20_columns", wide())] {
        let (_, mapping, _) = setup(&columns);
        let texts: Vec<Option<&[u8]>> = columns.iter().map(|c| c.text.map(str::as_bytes)).collect();
        let data = encode_row(&texts);
        let converter = Converter::new(&mapping);
        let mut row = CopyRow::new();
        let mut line = Vec::with_capacity(1024);
        let mut copy_row = |data: &[u8], line: &mut Vec<u8>| {
            line.clear();
            row.parse(data, columns.len()).expect("a valid COPY row");
            converter.snapshot_row(&row, line).expect("valid values");
            line.len()
        };
        copy_row(&data, &mut line);
        let json: serde_json::Value = serde_json::from_slice(&line).expect("valid JSON line");
        // The same row through pgoutput and through COPY gives the same values.
        let mut streamed = Vec::new();
        let mut cache = RelationCache::new();
        let (relation, _, payload) = setup(&columns);
        cache.apply(relation);
        decode_row(&cache, &mapping, &payload, &mut streamed);
        let streamed: serde_json::Value = serde_json::from_slice(&streamed).expect("valid JSON");
        assert_eq!(json, streamed, "COPY and pgoutput disagree on {shape}");
        group.bench_function(shape, |b| b.iter(|| copy_row(black_box(&data), &mut line)));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
