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
        let slot = format!("s_{}_{table}", env.name);
        let state_dir = env.state_dir.join(table);
        let pairs = env.config(&[
            ("TABLES", table),
            ("PG_PUBLICATION", &format!("pub_{table}")),
            ("PG_SLOT", &slot),
            ("STATE_DIR", &state_dir.display().to_string()),
            ("SNAPSHOT_MODE", "initial"),
            ("BATCH_LINGER_MS", "0"),
        ]);
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

fn two_instances_share_a_database_and_a_pipeline(first: Shell, second: Shell) {
    let env = Env::new("instances", SETUP, schema());
    let orders = Instance::new(&env, "orders", first);
    let payments = Instance::new(&env, "payments", second);
    let mut a = orders.start(&env);
    let mut b = payments.start(&env);
    assert!(orders.state_complete(&env), "{}", a.log_text());
    assert!(payments.state_complete(&env), "{}", b.log_text());
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
