//! Two slotline instances on one database and one Feldera pipeline, with disjoint tables
//! (docs/instances.md): each has its own publication, slot, state directory and metrics
//! port. Started together under writers on both tables, killed and restarted one at a
//! time, they never interfere, and both tables end equal. Both shells, and one instance of
//! each shell side by side.

use serde_json::json;
use slotline_tests::e2e::{Connector, Env, Shell, Writer};
use slotline_tests::pg::wait_for;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

const SETUP: &str = "CREATE TABLE orders (id bigint PRIMARY KEY, note text);
    CREATE TABLE payments (id bigint PRIMARY KEY, amount bigint);
    INSERT INTO orders SELECT g, 'o' || g FROM generate_series(1, 2000) g;
    INSERT INTO payments SELECT g, g * 10 FROM generate_series(1, 2000) g;
    CREATE PUBLICATION pub_orders FOR TABLE orders;
    CREATE PUBLICATION pub_payments FOR TABLE payments;";

fn schema() -> serde_json::Value {
    json!({"inputs": [
        {"name": "orders", "case_sensitive": false, "primary_key": ["id"], "materialized": true, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "note", "case_sensitive": false, "columntype": {"type": "VARCHAR", "nullable": true, "precision": -1}}]},
        {"name": "payments", "case_sensitive": false, "primary_key": ["id"], "materialized": true, "properties": {},
         "fields": [
            {"name": "id", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": false}},
            {"name": "amount", "case_sensitive": false, "columntype": {"type": "BIGINT", "nullable": true}}]}
    ], "outputs": []})
}

/// One instance's settings: its table, publication, slot and state directory.
struct Instance {
    table: &'static str,
    shell: Shell,
    pairs: Vec<(String, String)>,
    slot: String,
}

impl Instance {
    fn new(env: &Env, table: &'static str, shell: Shell) -> Instance {
        Self::with(env, table, shell, &[])
    }

    /// An instance with `extra` settings on top of its own.
    fn with(env: &Env, table: &'static str, shell: Shell, extra: &[(&str, &str)]) -> Instance {
        let slot = format!("s_{}_{table}", env.name);
        let state_dir = env.state_dir.join(table);
        let publication = format!("pub_{table}");
        let state_dir = state_dir.display().to_string();
        let mut settings = vec![
            ("TABLES", table),
            ("PG_PUBLICATION", publication.as_str()),
            ("PG_SLOT", slot.as_str()),
            ("STATE_DIR", state_dir.as_str()),
            ("SNAPSHOT_MODE", "initial"),
            ("BATCH_LINGER_MS", "0"),
        ];
        settings.extend_from_slice(extra);
        let pairs = env.config(&settings);
        Instance {
            table,
            shell,
            pairs,
            slot,
        }
    }

    fn start(&self, env: &Env) -> Connector {
        Connector::spawn(
            self.shell,
            &self.pairs,
            &format!("{}_{}", env.name, self.table),
        )
    }

    /// The slot confirmed everything written so far.
    fn caught_up(&self, env: &Env) -> bool {
        let target = env.sql("SELECT pg_current_wal_lsn()");
        wait_for(WAIT, || {
            (env.sql(&format!(
                "SELECT confirmed_flush_lsn >= '{target}'::pg_lsn FROM pg_replication_slots WHERE slot_name = '{}'",
                self.slot
            )) == "t")
                .then_some(())
        })
        .is_some()
    }

    fn state_complete(&self, env: &Env) -> bool {
        let path = env
            .state_dir
            .join(self.table)
            .join(format!("{}.state.json", self.slot));
        wait_for(WAIT, || {
            std::fs::read_to_string(&path)
                .ok()
                .filter(|s| s.contains("\"phase\": \"complete\""))
                .map(|_| ())
        })
        .is_some()
    }
}

/// Both instances started, each once its own copy is complete.
fn both_copied(env: &Env, first: &Instance, second: &Instance) -> (Connector, Connector) {
    let a = first.start(env);
    let b = second.start(env);
    assert!(first.state_complete(env), "{}", a.log_text());
    assert!(second.state_complete(env), "{}", b.log_text());
    (a, b)
}

fn two_instances_share_a_database_and_a_pipeline(first: Shell, second: Shell) {
    let env = Env::new("instances", SETUP, schema());
    let orders = Instance::new(&env, "orders", first);
    let payments = Instance::new(&env, "payments", second);
    let (mut a, mut b) = both_copied(&env, &orders, &payments);
    let writer = Writer::start(env.pg, &env.db, Duration::from_millis(2), |n| {
        let id = 10_000 + n;
        format!(
            "INSERT INTO orders VALUES ({id}, 'w'); INSERT INTO payments VALUES ({id}, {n});
             UPDATE orders SET note = note || '.' WHERE id = {k}; UPDATE payments SET amount = amount + 1 WHERE id = {k};
             DELETE FROM orders WHERE id = {d}; DELETE FROM payments WHERE id = {d}",
            k = 1 + n % 2000,
            d = 2000 - n % 1000
        )
    });
    // One instance is killed and restarted while the other keeps streaming, then the
    // other way round.
    for round in 0..2 {
        let before = writer.committed();
        assert!(writer.wait_committed(before + 50, WAIT), "writer stalled");
        let (victim, survivor, survivor_instance) = match round {
            0 => (&mut a, &mut b, &payments),
            _ => (&mut b, &mut a, &orders),
        };
        let survivor_pid = survivor.pid();
        victim.kill();
        let before = writer.committed();
        assert!(writer.wait_committed(before + 50, WAIT), "writer stalled");
        // The survivor is the same process it was, and its slot confirms what was
        // written while the other instance was down.
        assert!(survivor.is_running(), "{}", survivor.log_text());
        assert_eq!(survivor.pid(), survivor_pid);
        assert!(survivor_instance.caught_up(&env), "{}", survivor.log_text());
        let restarted = match round {
            0 => orders.start(&env),
            _ => payments.start(&env),
        };
        *victim = restarted;
    }
    let before = writer.committed();
    assert!(writer.wait_committed(before + 50, WAIT), "writer stalled");
    let written = writer.stop();
    assert!(orders.caught_up(&env), "{}", a.log_text());
    assert!(payments.caught_up(&env), "{}", b.log_text());
    env.assert_rows_equal("orders", "orders", "id");
    env.assert_rows_equal("payments", "payments", "id");
    for (connector, instance) in [(&mut a, &orders), (&mut b, &payments)] {
        let log = connector.log_text();
        assert!(!log.contains("ERROR"), "{}: {log}", instance.table);
        assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
    }
    assert!(written >= 150, "{written} transactions");
}

/// Feldera has one transaction per pipeline (docs/instances.md): two instances on one
/// pipeline with `FELDERA_TRANSACTIONS=all` adopt and commit each other's transactions, so
/// a source transaction is no longer delivered whole, but every acknowledgement still waits
/// for a completion Feldera gives only after a commit: under writers on both tables neither
/// instance stops and both tables end equal.
fn two_instances_with_feldera_transactions_on_one_pipeline_lose_nothing(shell: Shell) {
    let env = Env::new("instances_txn", SETUP, schema());
    let extra = [("FELDERA_TRANSACTIONS", "all"), ("BATCH_MAX_ROWS", "50")];
    let orders = Instance::with(&env, "orders", shell, &extra);
    let payments = Instance::with(&env, "payments", shell, &extra);
    let (mut a, mut b) = both_copied(&env, &orders, &payments);
    let writer = Writer::start(env.pg, &env.db, Duration::from_millis(2), |n| {
        let id = 10_000 + n;
        format!(
            "INSERT INTO orders SELECT {id} * 100 + g, 'w' FROM generate_series(0, 60) g;
             INSERT INTO payments SELECT {id} * 100 + g, {n} FROM generate_series(0, 60) g;
             UPDATE orders SET note = note || '.' WHERE id = {k}; UPDATE payments SET amount = amount + 1 WHERE id = {k}",
            k = 1 + n % 2000,
        )
    });
    assert!(writer.wait_committed(200, WAIT), "writer stalled");
    let written = writer.stop();
    assert!(orders.caught_up(&env), "{}", a.log_text());
    assert!(payments.caught_up(&env), "{}", b.log_text());
    env.assert_rows_equal("orders", "orders", "id");
    env.assert_rows_equal("payments", "payments", "id");
    let logs = format!("{}\n{}", a.log_text(), b.log_text());
    assert!(
        logs.contains("a Feldera transaction is already open"),
        "the instances met each other's transactions: {logs}"
    );
    for connector in [&mut a, &mut b] {
        assert_eq!(connector.stop(WAIT), Some(0), "{}", connector.log_text());
    }
    assert!(written >= 200, "{written} transactions");
}

#[test]
fn two_instances_with_feldera_transactions_on_one_pipeline_lose_nothing_in_both_shells() {
    for shell in Shell::BOTH {
        two_instances_with_feldera_transactions_on_one_pipeline_lose_nothing(shell);
    }
}

#[test]
fn two_tokio_instances_share_a_database_and_a_pipeline() {
    two_instances_share_a_database_and_a_pipeline(Shell::Tokio, Shell::Tokio);
}

#[test]
fn two_blocking_instances_share_a_database_and_a_pipeline() {
    two_instances_share_a_database_and_a_pipeline(Shell::Blocking, Shell::Blocking);
}

#[test]
fn a_tokio_and_a_blocking_instance_share_a_database_and_a_pipeline() {
    two_instances_share_a_database_and_a_pipeline(Shell::Tokio, Shell::Blocking);
}
