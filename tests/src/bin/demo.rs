//! `demo`: slotline end to end in under a minute, on a throwaway PostgreSQL and the Feldera
//! double, with a crash in the middle.
//!
//! ```text
//! cargo run -p slotline-tests --bin demo [-- --shell blocking]
//! ```
//! PostgreSQL already holds rows when slotline first starts: the initial snapshot copies
//! them (`SNAPSHOT_MODE=initial`, the default). Then it writes a workload, withholds
//! Feldera's completion of one batch, kills the connector with SIGKILL while it waits,
//! restarts it, and shows that the unacknowledged transaction is delivered again and that
//! PostgreSQL and Feldera end up holding the same rows. Exit 0 when they agree (and the slot
//! never moved past an unfinished batch), 1 otherwise.
//!
//! With `--ack-mode accepted` the story shows what the unsafe mode costs: the slot moves on
//! HTTP 200, Feldera restarts before processing the batch and loses it, and the restarted
//! connector has nothing left to replay. The rows differ, so it exits 1.
//!
//! Owns: the story and its printing. Everything it starts (cluster, double, connector,
//! psql, temporary files) is released by guards, also when a step fails or panics.

mod support;

use clap::Parser;
use serde_json::{json, Value};
use slotline_tests::e2e::Shell;
use slotline_tests::feldera_double::{CompletionDelay, DoubleConfig, FelderaDouble};
use slotline_tests::pg::PgCluster;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use support::{ConnectorProcess, Psql};

#[derive(Debug, Parser)]
#[command(about = "slotline end to end: PostgreSQL → slotline → Feldera double, with a crash")]
struct Args {
    /// Which binary runs the connector: tokio (`slotline`) or blocking (`slotline-blocking`).
    #[arg(long, default_value = "tokio", value_parser = support::parse_shell)]
    shell: Shell,
    /// FELDERA_ACK_MODE for the connector. `accepted` is the unsafe mode (acknowledge on
    /// HTTP 200): the demo then shows the slot moving past a batch Feldera never completed,
    /// Feldera losing it in a restart, and exits 1 because the rows differ.
    #[arg(long, default_value = "completed", value_parser = ["completed", "accepted"])]
    ack_mode: String,
}

const SLOT: &str = "slotline_demo";
const WAIT: Duration = Duration::from_secs(30);

const SETUP: &str = "CREATE TABLE users (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE items (sku text PRIMARY KEY, qty int NOT NULL);
CREATE PUBLICATION demo_pub FOR TABLE users, items;";

/// Rows PostgreSQL holds before slotline first starts: the initial snapshot copies them.
const EXISTING_ROWS: &[&str] = &[
    "INSERT INTO users VALUES (1, 'ada'), (2, 'grace'), (3, 'edsger'), (4, 'barbara')",
    "INSERT INTO items VALUES ('apple', 3), ('pear', 5)",
];

/// Written while slotline streams.
const FIRST_WRITES: &[&str] = &[
    "INSERT INTO users VALUES (6, 'alan')",
    "UPDATE users SET name = 'Ada' WHERE id = 1",
    "INSERT INTO items VALUES ('plum', 2)",
];

/// One transaction, written while Feldera withholds completion.
const WITHHELD_TRANSACTION: &str = "BEGIN;
UPDATE users SET id = 30 WHERE id = 3;
UPDATE items SET qty = 7 WHERE sku = 'pear';
DELETE FROM users WHERE id = 2;
INSERT INTO users VALUES (5, 'ken');
INSERT INTO items VALUES ('fig', 1);
COMMIT";

fn feldera_schema() -> Value {
    let column = |name: &str, kind: &str| {
        json!({"name": name, "case_sensitive": false,
               "columntype": {"type": kind, "nullable": false}})
    };
    let table = |name: &str, key: &str, fields: Vec<Value>| {
        json!({"name": name, "case_sensitive": false, "primary_key": [key],
               "materialized": false, "properties": {}, "fields": fields})
    };
    json!({"inputs": [
        table("users", "id", vec![column("id", "BIGINT"), column("name", "VARCHAR")]),
        table("items", "sku", vec![column("sku", "VARCHAR"), column("qty", "INTEGER")]),
    ], "outputs": []})
}

fn main() -> ExitCode {
    let args = Args::parse();
    let started = Instant::now();
    let mode = if args.ack_mode == "accepted" {
        AckMode::Accepted
    } else {
        AckMode::Completed
    };
    let outcome = std::panic::catch_unwind(|| run(args.shell, mode));
    let code = match outcome {
        Ok(Ok(verdict)) => {
            println!();
            if verdict.agree {
                println!("PostgreSQL and Feldera agree.");
            } else {
                println!("PostgreSQL and Feldera DO NOT agree (see above).");
            }
            match (mode, verdict.slot_held) {
                (AckMode::Completed, true) => {}
                (AckMode::Completed, false) => println!(
                    "The slot was acknowledged past a batch Feldera had not completed, \
                     which FELDERA_ACK_MODE=completed must never do."
                ),
                (AckMode::Accepted, false) => println!(
                    "This is what FELDERA_ACK_MODE=accepted costs: the slot was acknowledged \
                     when Feldera accepted the batch, Feldera lost it before processing it, \
                     and PostgreSQL no longer holds it for a replay."
                ),
                (AckMode::Accepted, true) => println!(
                    "The slot did not move on HTTP 200 although FELDERA_ACK_MODE=accepted \
                     asked for it."
                ),
            }
            u8::from(!(verdict.agree && verdict.slot_held))
        }
        Ok(Err(why)) => {
            eprintln!("\ndemo failed: {why}");
            1
        }
        Err(_) => {
            eprintln!("\ndemo failed (the panic message is above)");
            1
        }
    };
    println!(
        "everything it started is stopped and removed ({:.1} s in all)",
        started.elapsed().as_secs_f64()
    );
    ExitCode::from(code)
}

fn step(text: &str) {
    println!("\n== {text}");
}

fn say(text: &str) {
    println!("   {text}");
}

/// A directory removed on drop: the state directory and the connector logs.
#[derive(Debug)]
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn create() -> Result<ScratchDir, String> {
        let dir = std::env::temp_dir().join(format!("slotline-demo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        Ok(ScratchDir(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The demo's resources, dropped in reverse order (connector first, cluster last).
/// Fields drop in declaration order: the cluster goes last.
struct World {
    psql: Psql,
    feldera: FelderaDouble,
    scratch: ScratchDir,
    binary: PathBuf,
    vars: Vec<(String, String)>,
    _cluster: PgCluster,
}

/// How the demo ended: the rows compared equal; the slot never moved past an unfinished batch.
#[derive(Debug)]
struct Verdict {
    agree: bool,
    slot_held: bool,
}

/// `FELDERA_ACK_MODE`: which story the demo tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AckMode {
    /// The slot moves only once Feldera completed a batch.
    Completed,
    /// The slot moves on HTTP 200 (unsafe).
    Accepted,
}

impl AckMode {
    fn name(self) -> &'static str {
        match self {
            AckMode::Completed => "completed",
            AckMode::Accepted => "accepted",
        }
    }
}

fn run(shell: Shell, mode: AckMode) -> Result<Verdict, String> {
    println!(
        "slotline demo with the {} binary, FELDERA_ACK_MODE={}",
        shell.binary_name(),
        mode.name()
    );
    let binary = support::connector_binary(shell)?;
    let mut w = setup(binary)?;
    w.vars
        .push(("FELDERA_ACK_MODE".to_owned(), mode.name().to_owned()));

    step("PostgreSQL already holds rows; start slotline (SNAPSHOT_MODE=initial, the default)");
    for sql in EXISTING_ROWS {
        w.psql.query(sql)?;
        say(&format!("{sql};  (before slotline starts)"));
    }
    let mut connector = start_connector(&mut w, 1)?;
    let copied = connector.log_tail(200);
    match copied.lines().find(|l| l.contains("snapshot: copied")) {
        Some(line) => say(&format!(
            "the initial snapshot {}",
            line.split("snapshot: ").nth(1).unwrap_or(line)
        )),
        None => {
            return Err(failure(
                &connector,
                "slotline streams, but its log does not report the initial copy",
            ))
        }
    }
    show_feldera(&w.feldera);

    step("write to PostgreSQL while slotline streams");
    for sql in FIRST_WRITES {
        w.psql.query(sql)?;
        say(&format!("{sql};"));
    }
    let caught = wait_caught_up(&mut w, &mut connector)?;
    say(&format!(
        "slot {SLOT} confirmed {caught}: everything so far is in Feldera"
    ));
    show_feldera(&w.feldera);

    let (withheld_rows, before) = withhold_one_batch(&mut w, &mut connector, mode)?;
    let slot_held = kill_while_withheld(&mut w, &mut connector, &before, mode)?;

    let mut connector = restart(&mut w, withheld_rows, mode)?;

    step("compare PostgreSQL and Feldera, table by table");
    let agree = compare(&mut w, "users", "id")? & compare(&mut w, "items", "sku")?;

    step("stop slotline gracefully (SIGTERM)");
    let code = connector.terminate(Duration::from_secs(15));
    say(&format!(
        "exit code {}; slot {SLOT} at {}",
        code.map_or("none (killed)".to_owned(), |c| c.to_string()),
        w.psql.slot_confirmed(SLOT)?.unwrap_or_default()
    ));
    drop(connector);
    drop(w);
    Ok(Verdict { agree, slot_held })
}

/// Restarts the connector, waits until it caught up and says what it replayed.
fn restart(w: &mut World, withheld_rows: u64, mode: AckMode) -> Result<ConnectorProcess, String> {
    step("restart slotline");
    let marker = last_request_seq(&w.feldera);
    let at_restart = w.psql.slot_confirmed(SLOT)?.unwrap_or_default();
    let mut connector = start_connector(w, 2)?;
    let caught = wait_caught_up(w, &mut connector)?;
    let (replayed, requests) = ingress_rows_after(&w.feldera, marker);
    if caught == at_restart {
        say(&format!("slot {SLOT} stays at {caught}"));
    } else {
        say(&format!("slot {SLOT} moved from {at_restart} to {caught}"));
    }
    match (mode, replayed) {
        (AckMode::Completed, 0) => say(&format!(
            "UNEXPECTED: the restart replayed nothing, yet the withheld batch ({withheld_rows} rows) \
             was never acknowledged"
        )),
        (AckMode::Completed, _) => {
            say(&format!(
                "the restart replayed {replayed} rows in {requests} request(s): the transaction \
                 the slot was never told about (the withheld batch held {withheld_rows} rows)"
            ));
            say("Feldera had already processed them; its primary keys absorb the duplicates");
        }
        (AckMode::Accepted, 0) => say(&format!(
            "the restart replayed nothing: the slot is past the transaction, so the \
             {withheld_rows} rows Feldera lost are gone for good"
        )),
        (AckMode::Accepted, _) => say(&format!(
            "the restart replayed {replayed} rows in {requests} request(s)"
        )),
    }
    show_feldera(&w.feldera);
    Ok(connector)
}

fn setup(binary: PathBuf) -> Result<World, String> {
    step("start a throwaway PostgreSQL and the Feldera double");
    let pg = PgCluster::start();
    let db = pg.create_database("demo");
    pg.psql(&db, SETUP);
    say(&format!(
        "PostgreSQL on 127.0.0.1:{} (wal_level=logical), database {db}:",
        pg.port()
    ));
    for line in SETUP.lines() {
        say(&format!("  {line}"));
    }
    let feldera = FelderaDouble::start(DoubleConfig::new("demo", feldera_schema()))
        .map_err(|e| format!("start the Feldera double: {e}"))?;
    say(&format!(
        "Feldera double on {}, pipeline demo, tables users (PRIMARY KEY id) and items (PRIMARY KEY sku)",
        feldera.base_url()
    ));
    let psql = Psql::connect(pg.port(), &db)?;
    let scratch = ScratchDir::create()?;
    let mut vars = support::connector_vars(
        &pg.url(&db),
        &feldera.base_url(),
        "demo_pub",
        "users,items",
        scratch.path(),
    );
    // The demo's story starts from existing rows: the default mode copies them first.
    vars.retain(|(k, _)| k != "SNAPSHOT_MODE");
    Ok(World {
        psql,
        feldera,
        scratch,
        binary,
        vars,
        _cluster: pg,
    })
}

fn start_connector(w: &mut World, run: u32) -> Result<ConnectorProcess, String> {
    let log = w.scratch.path().join(format!("connector-{run}.log"));
    let mut connector = ConnectorProcess::spawn(&w.binary, &w.vars, log, false)?;
    let deadline = Instant::now() + WAIT;
    loop {
        if w.psql.slot_active(SLOT)? {
            break;
        }
        check_alive(&mut connector)?;
        if Instant::now() >= deadline {
            return Err(failure(&connector, "slotline did not start streaming"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    say(&format!(
        "{} (pid {}) is streaming from slot {SLOT} at {}",
        w.binary.display(),
        connector.pid(),
        w.psql.slot_confirmed(SLOT)?.unwrap_or_default()
    ));
    Ok(connector)
}

fn check_alive(connector: &mut ConnectorProcess) -> Result<(), String> {
    match connector.exit_code() {
        None => Ok(()),
        Some(code) => Err(failure(connector, &format!("slotline exited with {code}"))),
    }
}

fn failure(connector: &ConnectorProcess, what: &str) -> String {
    format!("{what}; its last log lines:\n{}", connector.log_tail(30))
}

/// Waits until the slot confirmed the current WAL position; returns the slot's position.
fn wait_caught_up(w: &mut World, connector: &mut ConnectorProcess) -> Result<String, String> {
    let target = w.psql.value("SELECT pg_current_wal_lsn()")?;
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        check_alive(connector)?;
        if w.psql.confirmed_at_least(SLOT, &target)? {
            return Ok(w.psql.slot_confirmed(SLOT)?.unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(failure(
        connector,
        &format!("slot {SLOT} did not reach {target}"),
    ))
}

/// Writes one transaction while the double withholds completion, and waits until slotline
/// sent it and is waiting for completion. Returns the rows sent and the slot position.
fn withhold_one_batch(
    w: &mut World,
    connector: &mut ConnectorProcess,
    mode: AckMode,
) -> Result<(u64, String), String> {
    step("Feldera accepts the next batch but withholds its completion");
    w.feldera.set_completion_delay(CompletionDelay::Never);
    let marker = last_request_seq(&w.feldera);
    let before = w.psql.slot_confirmed(SLOT)?.unwrap_or_default();
    w.psql.query(WITHHELD_TRANSACTION)?;
    for line in WITHHELD_TRANSACTION.lines() {
        say(line);
    }
    say("(a key change 3 -> 30, an update, a delete and two inserts, in one transaction)");
    let wal = w.psql.value("SELECT pg_current_wal_lsn()")?;
    let deadline = Instant::now() + WAIT;
    let (rows, requests) = loop {
        check_alive(connector)?;
        // Sent and now waiting; or (FELDERA_ACK_MODE=accepted) sent and already acknowledged.
        let sent = ingress_rows_after(&w.feldera, marker);
        if waiting_for_completion(&w.feldera, marker)
            || (sent.0 > 0 && w.psql.slot_confirmed(SLOT)?.as_deref() != Some(before.as_str()))
        {
            break sent;
        }
        if Instant::now() >= deadline {
            return Err(failure(connector, "slotline did not send the batch"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    say(&format!(
        "Feldera answered HTTP 200 to {requests} ingress request(s) with {rows} rows; \
         the batch is not processed yet"
    ));
    // Give slotline time to (wrongly) acknowledge, so holding still is evidence.
    std::thread::sleep(Duration::from_millis(500));
    let now = w.psql.slot_confirmed(SLOT)?.unwrap_or_default();
    match (mode, now == before) {
        (AckMode::Completed, true) => say(&format!(
            "PostgreSQL's WAL is at {wal}; slot {SLOT} is still at {now} (HTTP 200 is not durability)"
        )),
        (AckMode::Completed, false) => say(&format!(
            "UNEXPECTED: PostgreSQL's WAL is at {wal}; slot {SLOT} moved to {now} before Feldera \
             completed the batch"
        )),
        (AckMode::Accepted, false) => say(&format!(
            "PostgreSQL's WAL is at {wal}; slot {SLOT} moved from {before} to {now}: acknowledged \
             on HTTP 200, as FELDERA_ACK_MODE=accepted does"
        )),
        (AckMode::Accepted, true) => say(&format!(
            "UNEXPECTED: slot {SLOT} is still at {now} although FELDERA_ACK_MODE=accepted \
             acknowledges on HTTP 200"
        )),
    }
    Ok((rows, before))
}

/// SIGKILLs the connector while its batch is withheld. Then Feldera finishes the batch
/// (completed mode), or restarts and loses it (accepted mode, where nothing else could
/// show what was lost). Returns whether the slot stayed where it was before the withheld
/// transaction.
fn kill_while_withheld(
    w: &mut World,
    connector: &mut ConnectorProcess,
    before: &str,
    mode: AckMode,
) -> Result<bool, String> {
    match mode {
        AckMode::Completed => step("kill slotline with SIGKILL while it waits for the completion"),
        AckMode::Accepted => step(
            "kill slotline with SIGKILL (it waits for nothing: it acknowledged the batch on HTTP 200)",
        ),
    }
    let pid = connector.pid();
    let code = connector.kill();
    say(&format!(
        "pid {pid} killed (exit {}): no cleanup, no final status update",
        code.map_or("unknown".to_owned(), |c| c.to_string())
    ));
    // slotline refuses a slot another process holds: wait until the walsender noticed.
    let inactive =
        format!("SELECT NOT active FROM pg_replication_slots WHERE slot_name = '{SLOT}'");
    let deadline = Instant::now() + WAIT;
    while w.psql.value(&inactive)? != "t" {
        if Instant::now() >= deadline {
            return Err(format!(
                "slot {SLOT} stayed active after the connector was killed"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    say("Feldera so far processed only the earlier batches:");
    show_feldera(&w.feldera);
    w.feldera
        .set_completion_delay(CompletionDelay::Fixed(Duration::ZERO));
    match mode {
        AckMode::Completed => {
            w.feldera.release_completions();
            say("Feldera now finishes the batch it had accepted (the connector is gone and cannot learn it)");
        }
        AckMode::Accepted => {
            w.feldera.restart(true);
            say("Feldera restarts before processing the batch: what it had accepted but not processed is lost");
        }
    }
    let now = w.psql.slot_confirmed(SLOT)?.unwrap_or_default();
    let held = now == before;
    match (mode, held) {
        (AckMode::Completed, true) => say(&format!(
            "slot {SLOT} still at {now}: the withheld transaction was never acknowledged"
        )),
        (AckMode::Completed, false) => say(&format!(
            "UNEXPECTED: slot {SLOT} moved from {before} to {now} although the batch was never completed"
        )),
        (AckMode::Accepted, false) => say(&format!(
            "slot {SLOT} is at {now}, past the transaction Feldera lost: PostgreSQL may already \
             have recycled its WAL"
        )),
        (AckMode::Accepted, true) => say(&format!(
            "UNEXPECTED: slot {SLOT} still at {now} although the batch was acknowledged on HTTP 200"
        )),
    }
    Ok(held)
}

fn last_request_seq(feldera: &FelderaDouble) -> u64 {
    feldera.requests().iter().map(|r| r.seq).max().unwrap_or(0)
}

/// Rows and number of successful ingress requests that arrived after `marker`.
fn ingress_rows_after(feldera: &FelderaDouble, marker: u64) -> (u64, usize) {
    let requests = feldera.requests();
    let ingress: Vec<_> = requests
        .iter()
        .filter(|r| r.seq > marker && r.endpoint == "ingress" && r.status == 200)
        .collect();
    (
        ingress.iter().map(|r| r.rows.unwrap_or(0)).sum(),
        ingress.len(),
    )
}

/// True once an ingress request after `marker` succeeded and a completion poll followed it.
fn waiting_for_completion(feldera: &FelderaDouble, marker: u64) -> bool {
    let requests = feldera.requests();
    let last_ingress = requests
        .iter()
        .filter(|r| r.seq > marker && r.endpoint == "ingress" && r.status == 200)
        .map(|r| r.seq)
        .max();
    last_ingress.is_some_and(|seq| {
        requests
            .iter()
            .any(|r| r.seq > seq && r.endpoint == "completion_status")
    })
}

fn show_feldera(feldera: &FelderaDouble) {
    for (table, key) in [("users", "id"), ("items", "sku")] {
        let rows = feldera_rows(feldera, table, key);
        let text: Vec<String> = rows.iter().map(Value::to_string).collect();
        say(&format!("Feldera {table}: {}", text.join(" ")));
    }
}

/// The double's processed rows of `table`, sorted by `key`; a row whose weight is not 1
/// is shown with its weight so a comparison fails visibly.
fn feldera_rows(feldera: &FelderaDouble, table: &str, key: &str) -> Vec<Value> {
    let Some(snapshot) = feldera.table(table) else {
        return Vec::new();
    };
    let mut rows: Vec<Value> = snapshot
        .rows
        .into_iter()
        .map(|r| {
            if r.weight == 1 {
                r.row
            } else {
                json!({"row": r.row, "weight": r.weight})
            }
        })
        .collect();
    rows.sort_by_key(|row| row[key].to_string());
    rows
}

fn pg_rows(psql: &mut Psql, table: &str, key: &str) -> Result<Vec<Value>, String> {
    let text = psql.value(&format!(
        "SELECT coalesce(json_agg(row_to_json(t)), '[]') FROM {table} t"
    ))?;
    let mut rows: Vec<Value> = match serde_json::from_str(&text) {
        Ok(Value::Array(rows)) => rows,
        _ => return Err(format!("unexpected rows from {table}: {text}")),
    };
    // The same order as Feldera's rows: by the key's JSON text.
    rows.sort_by_key(|row| row[key].to_string());
    Ok(rows)
}

fn compare(w: &mut World, table: &str, key: &str) -> Result<bool, String> {
    let pg = pg_rows(&mut w.psql, table, key)?;
    let feldera = feldera_rows(&w.feldera, table, key);
    let equal = pg == feldera;
    say(&format!(
        "{table}: PostgreSQL {} rows, Feldera {} rows: {}",
        pg.len(),
        feldera.len(),
        if equal {
            "same rows, same values"
        } else {
            "DIFFERENT"
        }
    ));
    if !equal {
        say(&format!("  PostgreSQL: {}", Value::Array(pg)));
        say(&format!("  Feldera:    {}", Value::Array(feldera)));
    }
    Ok(equal)
}
