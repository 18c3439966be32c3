//! Pipeline throughput: a recorded stream of 100,000 single-row transactions, and one
//! 100,000-row transaction, through the real `Pipeline` (startup scripted, Feldera's answers
//! immediate: accepted, then complete), with bytes allocated per row.
//!
//! `cargo bench -p slotline-core --bench pipeline`

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use slotline_core::io::{Command, ConnId, Driver, Input};
use slotline_core::pgoutput::encode;
use slotline_core::pgoutput::ReplicaIdentity;
use slotline_core::pipeline::Pipeline;
use slotline_core::testing::{FakePg, FakeTable, Script};
use slotline_core::time::{Now, PgTime};
use slotline_core::wire::testing::replication_frame;
use slotline_core::wire::{ReplicationMessage, XLogData};
use slotline_core::Lsn;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use std::alloc::System;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ROWS: u64 = 100_000;
const SCHEMA: &str = r#"{"inputs":[{"name":"users","case_sensitive":false,"primary_key":["id"],"materialized":false,"properties":{},
  "fields":[{"name":"id","case_sensitive":false,"columntype":{"type":"BIGINT","nullable":false}},
            {"name":"name","case_sensitive":false,"columntype":{"type":"VARCHAR","nullable":true,"precision":-1}},
            {"name":"created","case_sensitive":false,"columntype":{"type":"TIMESTAMP","nullable":true}}]}],"outputs":[]}"#;

fn table() -> FakeTable {
    FakeTable::new(
        16384,
        "users",
        ReplicaIdentity::Default,
        &[
            ("id", 20, true),
            ("name", 25, false),
            ("created", 1114, false),
        ],
    )
}

fn frame(out: &mut Vec<u8>, wal_start: u64, payload: Vec<u8>) {
    let message = ReplicationMessage::XLogData(XLogData {
        wal_start: Lsn(wal_start),
        wal_end: Lsn(wal_start),
        server_time: PgTime(0),
        data: Bytes::from(payload),
    });
    out.extend(replication_frame(&message));
}

/// The replication stream: `transactions` transactions of `rows / transactions` inserts.
fn stream(transactions: u64) -> Vec<u8> {
    let per = ROWS / transactions;
    let mut out = Vec::new();
    frame(&mut out, 0, encode::relation(&table().relation));
    let mut lsn = 0x10_0000u64;
    for tx in 0..transactions {
        let commit_lsn = lsn + per * 0x40 + 0x20;
        frame(
            &mut out,
            lsn,
            encode::begin(Lsn(commit_lsn), PgTime(0), tx as u32),
        );
        for r in 0..per {
            let id = (tx * per + r).to_string();
            let row = encode::row(&[
                Some(&id),
                Some("a user name of moderate length"),
                Some("2024-05-01 12:34:56.789"),
            ]);
            frame(&mut out, lsn + 0x10 + r * 0x40, encode::insert(16384, row));
        }
        frame(
            &mut out,
            commit_lsn,
            encode::commit(Lsn(commit_lsn), Lsn(commit_lsn + 0x30), PgTime(0)),
        );
        lsn = commit_lsn + 0x30;
    }
    out
}

fn streaming_pipeline() -> (Pipeline, ConnId, Now) {
    let pg = FakePg {
        wal_sender_timeout: "60s".into(),
        tables: vec![table()],
        slot_confirmed: Some(Lsn(0x1000)),
        truncate_published: true,
        slot_busy_answers: 0,
        temporary_slot_taken: 0,
        timeline: 1,
        timeline_history: None,
        system_id: "7000000000000000001".into(),
        via_root: false,
    };
    Script::streaming(
        &[("TABLES", "users"), ("BATCH_LINGER_MS", "50")],
        pg,
        SCHEMA,
    )
    .into_parts()
}

/// Feeds the stream in 64 KiB reads and answers Feldera at once; returns the rows posted.
fn run(pipeline: &mut Pipeline, conn: ConnId, mut now: Now, stream: &[u8]) -> u64 {
    let mut rows_posted = 0u64;
    let mut paused = false;
    let mut offset = 0;
    let mut answers: Vec<Input> = Vec::new();
    loop {
        while let Some(command) = pipeline.poll_command() {
            match command {
                Command::Http { id, request } if request.url.contains("/ingress/") => {
                    rows_posted += request.body.iter().filter(|b| **b == b'\n').count() as u64;
                    answers.push(Input::HttpDone {
                        id,
                        status: 200,
                        body: Bytes::from_static(br#"{"token":"t"}"#),
                    });
                }
                Command::Http { id, .. } => answers.push(Input::HttpDone {
                    id,
                    status: 200,
                    body: Bytes::from_static(br#"{"status":"complete","step":1}"#),
                }),
                Command::PgPauseRead { .. } => paused = true,
                Command::PgResumeRead { .. } => paused = false,
                Command::Exit { code, reason } => panic!("exit {code}: {reason}"),
                _ => {}
            }
        }
        if let Some(answer) = answers.pop() {
            pipeline.handle(now, answer);
            continue;
        }
        if !paused && offset < stream.len() {
            let end = (offset + 65_536).min(stream.len());
            pipeline.handle(
                now,
                Input::PgBytes {
                    conn,
                    bytes: Bytes::copy_from_slice(&stream[offset..end]),
                },
            );
            offset = end;
            continue;
        }
        match pipeline.poll_timeout() {
            Some(deadline) if rows_posted < ROWS => {
                now.mono = now.mono.max(deadline.at);
                pipeline.handle(now, Input::Tick);
            }
            _ => return rows_posted,
        }
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline");
    group.sample_size(10);
    group.throughput(Throughput::Elements(ROWS));
    for (name, transactions) in [
        ("100k_single_row_transactions", ROWS),
        ("one_100k_row_transaction", 1),
    ] {
        let bytes = stream(transactions);
        // One measured pass for allocations per row (not timed).
        let (mut pipeline, conn, now) = streaming_pipeline();
        let region = Region::new(GLOBAL);
        let posted = run(&mut pipeline, conn, now, &bytes);
        let stats = region.change();
        assert_eq!(posted, ROWS);
        eprintln!(
            "{name}: {:.1} bytes allocated per row, {:.3} allocations per row (input chunks included)",
            stats.bytes_allocated as f64 / ROWS as f64,
            stats.allocations as f64 / ROWS as f64
        );
        group.bench_function(name, |b| {
            b.iter_batched(
                streaming_pipeline,
                |(mut pipeline, conn, now)| assert_eq!(run(&mut pipeline, conn, now, &bytes), ROWS),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
