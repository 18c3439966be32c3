//! The double's ad-hoc queries cost what Feldera's cost (a full scan of the table, whatever
//! the WHERE and LIMIT; a sort with ORDER BY), are counted per table, and answer as a
//! stream that a reader who stops reading holds back.

#[path = "feldera_double/client.rs"]
mod client;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use client::{start, Client, PIPELINE};
use serde_json::{json, Value};
use slotline_tests::feldera_double::{FelderaDouble, QueryStats, CHANNEL_PIECES, PIECE_BYTES};

/// Inserts ids `1..=rows` into `t`, each with a name of `name_len` bytes, in requests of
/// 2,000 rows.
fn fill(c: &Client, rows: u64, name_len: usize) {
    let mut id = 1;
    while id <= rows {
        let end = (id + 1_999).min(rows);
        let body: String = (id..=end)
            .map(|i| {
                let name = format!("{i:0>name_len$}");
                format!("{}\n", json!({"insert": {"id": i, "name": name}}))
            })
            .collect();
        c.ingest_ok("t", &body);
        id = end + 1;
    }
}

fn ids(reply: &client::Reply) -> Vec<i64> {
    assert_eq!(reply.status, 200, "{}", reply.text);
    reply
        .lines()
        .iter()
        .map(|row| row["id"].as_i64().expect("an id"))
        .collect()
}

#[test]
fn every_query_scans_the_whole_table_whatever_its_where_and_limit() {
    let double = start();
    let c = Client::new(&double);
    fill(&c, 2_000, 4);
    assert_eq!(double.query_stats(), QueryStats::default(), "no query yet");

    assert_eq!(ids(&c.query("SELECT id FROM t LIMIT 1")).len(), 1);
    assert_eq!(double.query_stats().rows_scanned_of("t"), 2_000);
    assert_eq!(ids(&c.query("SELECT id FROM t WHERE id = 5")), vec![5]);
    assert_eq!(double.query_stats().rows_scanned_of("t"), 4_000);
    // The old keyset page: filter, order, limit; still a scan of all 2,000 rows.
    assert_eq!(
        ids(&c.query("SELECT t.id FROM t WHERE t.id > 10 ORDER BY t.id LIMIT 3")),
        vec![11, 12, 13]
    );
    assert_eq!(
        ids(&c.query("SELECT id FROM t WHERE id > 1997 ORDER BY id DESC")),
        vec![2000, 1999, 1998]
    );
    assert_eq!(
        c.query("SELECT COUNT(*) AS \"slotline_count\" FROM t WHERE id <= 10")
            .lines(),
        vec![json!({"slotline_count": 10})]
    );
    let stats = double.query_stats();
    assert_eq!(stats.rows_scanned_of("t"), 10_000, "five full scans");
    assert_eq!(stats.queries_of("t"), 5);

    // Other relations are counted apart; a refused query counts for the relation it named
    // (a non-materialized one) or only in the total (one the double cannot parse).
    c.ingest_ok("m", r#"{"insert": {"k": "a", "n": 1}}"#);
    assert_eq!(c.query("SELECT * FROM m").lines().len(), 1);
    assert_eq!(c.query("SELECT * FROM \"Quoted\"").status, 400);
    assert_eq!(c.query("SELECT 1 + 1 FROM t").status, 400);
    let stats = double.query_stats();
    assert_eq!(
        (
            stats.queries_of("t"),
            stats.queries_of("m"),
            stats.queries_of("Quoted")
        ),
        (5, 1, 1)
    );
    assert_eq!(stats.queries, 8);
    assert_eq!(stats.rows_scanned, 10_001);
    assert_eq!((stats.open_answers, stats.unsent_bytes), (0, 0));

    let over_http = c.get("/control/queries").json();
    assert_eq!(over_http["queries"], 8);
    assert_eq!(
        over_http["tables"]["t"],
        json!({"queries": 5, "rows_scanned": 10_000})
    );
    assert_eq!(c.delete("/control/queries").status, 200);
    assert_eq!(double.query_stats(), QueryStats::default());
}

#[test]
fn row_count_is_what_a_query_counts() {
    let double = start();
    let c = Client::new(&double);
    fill(&c, 30, 4);
    c.ingest_ok("t", r#"{"delete": {"id": 3}}"#);
    let row = r#"{"k": "x", "n": 1}"#;
    c.ingest_ok(
        "m",
        &format!("{{\"insert\": {row}}}\n{{\"insert\": {row}}}"),
    );
    assert_eq!(double.row_count("t"), Some(29));
    assert_eq!(
        double.row_count("m"),
        Some(2),
        "a row of weight 2 counts twice"
    );
    assert_eq!(
        c.query("SELECT COUNT(*) AS n FROM m").lines(),
        vec![json!({"n": 2})]
    );
    assert_eq!(double.row_count("\"Quoted\""), Some(0));
    assert_eq!(double.row_count("nope"), None);
}

#[test]
fn a_query_is_logged_when_its_answer_ended_with_its_table_and_rows() {
    let double = start();
    let c = Client::new(&double);
    fill(&c, 700, 4);
    assert_eq!(ids(&c.query("SELECT id FROM t WHERE id > 300")).len(), 400);
    let logged: Vec<_> = double
        .requests()
        .into_iter()
        .filter(|r| r.endpoint == "query")
        .collect();
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0].status, 200);
    assert_eq!(logged[0].table.as_deref(), Some("t"));
    assert_eq!(logged[0].rows, Some(400));
    assert_eq!(double.request_counts().get("query"), Some(&1));
}

/// Rows of `t` in the streaming tests, and the bytes of each row's name: an answer of about
/// 40 MB, far more than the double's own buffers and the sockets' together.
const BIG_ROWS: u64 = 40_000;
const NAME_BYTES: usize = 1_000;

/// A GET of `sql` over a raw socket whose reading the test controls; the answer's first
/// `at_least` bytes (headers included) are read.
fn open_query(double: &FelderaDouble, sql: &str, at_least: usize) -> (TcpStream, Vec<u8>) {
    let mut stream = TcpStream::connect(double.addr()).expect("connect to the double");
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("a read timeout");
    let mut path = format!("/v0/pipelines/{PIPELINE}/query?format=json&sql=");
    for b in sql.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => path.push(b as char),
            _ => path.push_str(&format!("%{b:02X}")),
        }
    }
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: double\r\nConnection: close\r\n\r\n"
    )
    .expect("send the request");
    let mut read = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    while read.len() < at_least {
        let n = stream.read(&mut buf).expect("read the answer");
        assert!(n > 0, "the answer ended after {} bytes", read.len());
        read.extend_from_slice(&buf[..n]);
    }
    (stream, read)
}

/// Waits until the double produced no more answer bytes for a while (its scan is held
/// back, or done) and returns its counters then.
fn settled(double: &FelderaDouble) -> QueryStats {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = double.query_stats();
    let mut quiet = 0;
    while quiet < 10 {
        assert!(
            Instant::now() < deadline,
            "the answer never settled: {last:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
        let now = double.query_stats();
        quiet = if now.answer_bytes == last.answer_bytes && now.rows_scanned == last.rows_scanned {
            quiet + 1
        } else {
            0
        };
        last = now;
    }
    last
}

/// The most the double may count as held of an answer nobody reads: the channel's pieces
/// and the one waiting to enter it, plus one for the instant between the body taking a
/// piece and counting it taken (the scan may count its next piece in between); each piece
/// is at most one line over `PIECE_BYTES`.
fn double_buffer_bound() -> u64 {
    ((CHANNEL_PIECES + 2) * (PIECE_BYTES + NAME_BYTES + 64)) as u64
}

/// The rest of an HTTP/1.1 chunked answer read to its end, de-chunked, as NDJSON lines.
fn read_to_end(mut stream: TcpStream, mut read: Vec<u8>) -> Vec<Value> {
    stream.read_to_end(&mut read).expect("read the rest");
    let split = read
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("the end of the headers");
    let head = String::from_utf8_lossy(&read[..split]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let mut body = Vec::new();
    let mut rest = &read[split + 4..];
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16)
            .expect("a hexadecimal chunk size");
        rest = &rest[line_end + 2..];
        if size == 0 {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
    String::from_utf8(body)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("an NDJSON line"))
        .collect()
}

#[test]
fn a_reader_that_stops_reading_holds_the_scan_back_and_the_double_buffers_a_bounded_amount() {
    let double = start();
    let c = Client::new(&double);
    fill(&c, BIG_ROWS, NAME_BYTES);

    // Without ORDER BY the scan yields rows as it visits them: it stops where the reader
    // stopped (plus what the double and the sockets hold), long before the table's end.
    let (stream, read) = open_query(&double, "SELECT id, name FROM t", 64 * 1024);
    let held = settled(&double);
    assert!(
        held.rows_scanned_of("t") < BIG_ROWS,
        "the scan ran to the end while the client read {} bytes: {held:?}",
        read.len()
    );
    assert_eq!(held.open_answers, 1);
    assert!(
        held.max_unsent_bytes <= double_buffer_bound(),
        "the double held {} unread bytes (bound {}): {held:?}",
        held.max_unsent_bytes,
        double_buffer_bound()
    );

    // Reading on gets every row, in the table's order, once.
    let rows = read_to_end(stream, read);
    let got: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
    assert_eq!(got, (1..=BIG_ROWS as i64).collect::<Vec<_>>());
    assert_eq!(rows[0]["name"].as_str().map(str::len), Some(NAME_BYTES));
    let done = settled(&double);
    assert_eq!(done.rows_scanned_of("t"), BIG_ROWS);
    assert_eq!((done.open_answers, done.unsent_bytes), (0, 0));
    assert!(done.max_unsent_bytes <= double_buffer_bound(), "{done:?}");
    assert!(done.answer_bytes > 40_000_000, "{done:?}");

    // With ORDER BY the scan sorts everything first: every row is visited although the
    // reader holds the answer back just the same.
    double.clear_query_stats();
    let (stream, read) = open_query(
        &double,
        "SELECT id, name FROM t ORDER BY id DESC",
        64 * 1024,
    );
    let held = settled(&double);
    assert_eq!(held.rows_scanned_of("t"), BIG_ROWS, "{held:?}");
    assert!(held.answer_bytes < done.answer_bytes / 2, "{held:?}");
    assert!(held.max_unsent_bytes <= double_buffer_bound(), "{held:?}");
    let rows = read_to_end(stream, read);
    assert_eq!(rows.len() as u64, BIG_ROWS);
    assert_eq!(rows[0]["id"], BIG_ROWS);
}

#[test]
fn a_reader_that_goes_away_stops_the_scan() {
    let double = start();
    let c = Client::new(&double);
    fill(&c, BIG_ROWS, NAME_BYTES);
    let (stream, _) = open_query(&double, "SELECT id, name FROM t", 64 * 1024);
    settled(&double);
    drop(stream);
    let deadline = Instant::now() + Duration::from_secs(30);
    while double.query_stats().open_answers > 0 {
        assert!(Instant::now() < deadline, "the answer stayed open");
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = settled(&double);
    assert!(after.rows_scanned_of("t") < BIG_ROWS, "{after:?}");
    assert_eq!(after.unsent_bytes, 0, "{after:?}");
    let logged = double
        .requests()
        .into_iter()
        .find(|r| r.endpoint == "query")
        .expect("the query is logged once its client went away");
    assert!(logged.rows.is_some_and(|n| n < BIG_ROWS), "{logged:?}");
    // The double still answers.
    assert_eq!(
        c.query("SELECT COUNT(*) FROM t").lines(),
        vec![json!({"count(*)": BIG_ROWS})]
    );
}

#[test]
fn a_scan_cost_per_row_changes_no_answer() {
    let double = start();
    let c = Client::new(&double);
    fill(&c, 300, 4);
    let r = c.post("/control/scan_cost", r#"{"ns_per_row": 20000}"#);
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(
        ids(&c.query("SELECT id FROM t WHERE id >= 299 ORDER BY id")),
        vec![299, 300]
    );
    assert_eq!(ids(&c.query("SELECT id FROM t")).len(), 300);
    assert_eq!(c.post("/control/scan_cost", r#"{"ns": 1}"#).status, 400);
    double.set_scan_row_cost(Duration::ZERO);
    assert_eq!(double.query_stats().rows_scanned_of("t"), 600);
}

/// A client that deletes the keys it has read while it goes on reading: its deletes are
/// logged before the query that answered them ended (what the end-to-end tests look at to
/// tell a streaming reader), and the query answers the table as of its start.
#[test]
fn deletes_sent_while_reading_land_before_the_answer_ends_and_leave_it_unchanged() {
    let double = start();
    let c = Client::new(&double);
    fill(&c, 3_000, 4);
    double.clear_requests();
    // At least 3,000 x 1 ms: the scan outlasts the first deletes by far.
    double.set_scan_row_cost(Duration::from_millis(1));
    let answer = ureq::get(format!("{}/v0/pipelines/{PIPELINE}/query", c.base))
        .query("sql", "SELECT id AS k0 FROM t")
        .query("format", "json")
        .call()
        .expect("the query answers");
    let mut keys = Vec::new();
    for line in BufReader::new(answer.into_body().into_reader()).lines() {
        let row: Value = serde_json::from_str(&line.expect("a line")).expect("a JSON line");
        keys.push(row["k0"].as_i64().expect("a key"));
        if keys.len() == 100 {
            let deletes: String = keys
                .iter()
                .map(|k| format!("{}\n", json!({"delete": {"id": k}})))
                .collect();
            c.ingest_ok("t", &deletes);
        }
    }
    double.set_scan_row_cost(Duration::ZERO);
    assert_eq!(
        keys,
        (1..=3_000).collect::<Vec<i64>>(),
        "the snapshot of the start"
    );
    assert_eq!(double.row_count("t"), Some(2_900));
    let log = double.requests();
    let query = log
        .iter()
        .find(|r| r.endpoint == "query")
        .expect("the query");
    let delete = log
        .iter()
        .find(|r| r.endpoint == "ingress")
        .expect("the deletes");
    assert_eq!(query.rows, Some(3_000));
    assert!(
        delete.finished < query.finished,
        "delete {delete:?} vs query {query:?}"
    );
}
