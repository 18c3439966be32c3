//! `METRICS_ADDR`: a small HTTP server on its own thread (tiny_http, no async runtime)
//! serving what the core publishes in `Health`:
//!
//! - `/metrics`: Prometheus text (version 0.0.4), encoded by `prometheus-client` from the
//!   latest health at each scrape;
//! - `/healthz`: 200 while the process runs;
//! - `/readyz`: 200 when the core says it is ready (`Health::readiness`: streaming, and
//!   durable progress within the no-progress deadline), 503 with the reason otherwise.
//!
//! The run loop hands the core's health to a `Publisher` after its inputs (at most every
//! `PUBLISH_EVERY`); the server thread only reads the last one. Nothing here decides
//! anything about the domain: names, help texts and the mapping of health fields to metrics.

use crate::clock::Clock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use slotline_core::health::{Health, PhaseName};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the run loop copies the core's health for the server, at most.
pub const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The last health, shared between the run loop and the server thread.
#[derive(Debug, Default)]
struct Latest {
    health: Mutex<Option<Health>>,
}

impl Latest {
    fn get(&self) -> Option<Health> {
        self.health.lock().map(|s| s.clone()).unwrap_or(None)
    }
}

/// The run loop's side: hands over the core's health.
#[derive(Clone, Debug)]
pub struct Publisher {
    latest: Arc<Latest>,
    last: Option<Instant>,
    /// A publish was skipped inside the window: the health served is older than the
    /// core's, and must be replaced when the window ends (`due`), not at the next input,
    /// which may be seconds away on a quiet stream.
    skipped: bool,
}

impl Publisher {
    /// Publishes `health` unless the last one is younger than `PUBLISH_EVERY` (`force`:
    /// publish anyway, for the last health before exiting).
    pub fn publish(&mut self, health: impl FnOnce() -> Option<Health>, force: bool) {
        let now = Instant::now();
        if !force && self.last.is_some_and(|t| now < t + PUBLISH_EVERY) {
            self.skipped = true;
            return;
        }
        self.last = Some(now);
        self.skipped = false;
        if let (Some(health), Ok(mut slot)) = (health(), self.latest.health.lock()) {
            *slot = Some(health);
        }
    }

    /// When the run loop must publish again although no input came: the end of the window
    /// in which a publish was skipped. So a scrape sees the core's state as of at most one
    /// window ago.
    pub fn due(&self) -> Option<Instant> {
        self.skipped
            .then_some(self.last)
            .flatten()
            .map(|last| last + PUBLISH_EVERY)
    }
}

/// The server; dropping it stops the thread.
pub struct MetricsServer {
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
    latest: Arc<Latest>,
    addr: String,
}

impl MetricsServer {
    /// Listens on `addr` (`host:port`; port 0 picks one) and serves from a thread.
    pub fn start(addr: &str, clock: Clock) -> Result<MetricsServer, String> {
        let server = tiny_http::Server::http(addr).map_err(|e| e.to_string())?;
        let bound = server
            .server_addr()
            .to_ip()
            .map_or_else(|| addr.to_owned(), |a| a.to_string());
        let server = Arc::new(server);
        let latest = Arc::new(Latest::default());
        let thread = {
            let (server, latest) = (server.clone(), latest.clone());
            std::thread::Builder::new()
                .name("metrics".into())
                .spawn(move || serve(&server, &latest, clock))
                .map_err(|e| e.to_string())?
        };
        Ok(MetricsServer {
            server,
            thread: Some(thread),
            latest,
            addr: bound,
        })
    }

    /// The address it listens on (with the port the OS chose for port 0).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn publisher(&self) -> Publisher {
        Publisher {
            latest: self.latest.clone(),
            last: None,
            skipped: false,
        }
    }
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(server: &tiny_http::Server, latest: &Latest, clock: Clock) {
    while let Ok(request) = server.recv() {
        let path = request.url().split('?').next().unwrap_or("").to_owned();
        let (code, content_type, body) = match (request.method(), path.as_str()) {
            (tiny_http::Method::Get, "/metrics") => match render(latest.get(), clock) {
                Ok(text) => (
                    200,
                    prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
                    text,
                ),
                Err(_) => (500, "text/plain", "cannot encode the metrics\n".into()),
            },
            (tiny_http::Method::Get, "/healthz") => (200, "text/plain", "ok\n".into()),
            (tiny_http::Method::Get, "/readyz") => {
                let now = clock.now().mono;
                match latest.get().map(|s| s.readiness(now)) {
                    Some(Ok(())) => (200, "text/plain", "ready\n".into()),
                    Some(Err(why)) => (503, "text/plain", format!("not ready: {why}\n")),
                    None => (503, "text/plain", "not ready: starting\n".into()),
                }
            }
            _ => (
                404,
                "text/plain",
                "not found: /metrics, /healthz and /readyz are served\n".into(),
            ),
        };
        let header = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
            .unwrap_or_else(|()| {
                tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"text/plain"[..])
                    .expect("a constant header is valid")
            });
        let response = tiny_http::Response::from_string(body)
            .with_status_code(code)
            .with_header(header);
        if let Err(error) = request.respond(response) {
            tracing::debug!("metrics: cannot answer a request: {error}");
        }
    }
}

/// The Prometheus text for `health` (only the process metrics before the core published
/// one).
pub fn render(health: Option<Health>, clock: Clock) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(HealthMetrics { health, clock }));
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &registry)?;
    Ok(text)
}

#[derive(Debug)]
struct HealthMetrics {
    health: Option<Health>,
    clock: Clock,
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> std::fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> std::fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for HealthMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let Some(health) = &self.health else {
            return Ok(());
        };
        let e = &mut encoder;
        let now = self.clock.now().mono;
        let lsn = |l: slotline_core::Lsn| l.0 as f64;
        gauge(
            e,
            "slotline_received_lsn",
            "WAL position of the last change read from the replication stream (bytes)",
            lsn(health.received),
        )?;
        gauge(
            e,
            "slotline_flushed_lsn",
            "WAL position acknowledged to PostgreSQL as durable in Feldera (bytes)",
            lsn(health.flush),
        )?;
        gauge(
            e,
            "slotline_complete_lsn",
            "WAL position Feldera completed (processed); with FELDERA_DURABILITY=checkpoint the flush waits for a checkpoint to hold it (bytes)",
            lsn(health.complete),
        )?;
        gauge(
            e,
            "slotline_checkpoint_lag_bytes",
            "From the acknowledged position to what Feldera completed: WAL kept until a checkpoint holds it (bytes)",
            health.complete.saturating_distance_from(health.flush) as f64,
        )?;
        let checkpoints = &health.checkpoints;
        counter(
            e,
            "slotline_checkpoints_requested",
            "Feldera checkpoints requested",
            checkpoints.requested,
        )?;
        counter(
            e,
            "slotline_checkpoints_succeeded",
            "Feldera checkpoints that succeeded",
            checkpoints.succeeded,
        )?;
        counter(e, "slotline_checkpoints_failed", "Feldera checkpoints that failed, were refused for now or timed out (nothing acknowledged for them)", checkpoints.failed)?;
        counter(
            e,
            "slotline_feldera_incarnation_changes",
            "New incarnations of the Feldera pipeline (restarts) this run saw",
            checkpoints.incarnation_changes,
        )?;
        if let Some(saved) = checkpoints.last_saved {
            gauge(
                e,
                "slotline_checkpoint_age_seconds",
                "Time since the newest Feldera checkpoint slotline acknowledged with succeeded",
                now.since(saved) as f64 / 1e6,
            )?;
        }
        if let Some(slot) = &health.slot {
            gauge(
                e,
                "slotline_server_wal_lsn",
                "The server's current WAL position, as last sampled (bytes)",
                lsn(slot.current_wal),
            )?;
            if let Some(retained) = slot.retained_bytes() {
                gauge(e, "slotline_slot_retained_wal_bytes", "WAL the slot keeps on the server (current WAL minus restart_lsn), as last sampled", retained as f64)?;
            }
            if let Some(safe) = slot.slot.as_ref().and_then(|s| s.safe_wal_size) {
                gauge(
                    e,
                    "slotline_slot_safe_wal_size_bytes",
                    "WAL that may still be written before the slot is in danger (safe_wal_size)",
                    safe as f64,
                )?;
            }
        }
        gauge(
            e,
            "slotline_replication_lag_seconds",
            "Age, by the source's commit times, of the oldest change read and not acknowledged (0 when caught up)",
            slotline_core::lag::lag_seconds(health.oldest_unacknowledged, self.clock.now().wall),
        )?;
        if let Some(lag) = health.lag_bytes() {
            gauge(
                e,
                "slotline_lag_bytes",
                "From the acknowledged position to the server's current WAL (bytes)",
                lag as f64,
            )?;
        }
        gauge(e, "slotline_slot_wal_warning", "1 while the retained WAL is past its warning limit (80% of max_slot_wal_keep_size or SLOT_WAL_WARN_BYTES)", f64::from(u8::from(health.slot_wal_warning)))?;
        counter(
            e,
            "slotline_rows_sent",
            "Rows in ingress requests Feldera accepted",
            health.sent.rows_sent,
        )?;
        counter(
            e,
            "slotline_snapshot_rows_sent",
            "Of those, rows the initial snapshot copied",
            health.sent.snapshot_rows_sent,
        )?;
        counter(
            e,
            "slotline_ingress_requests",
            "Ingress requests Feldera accepted",
            health.sent.ingress_requests,
        )?;
        counter(
            e,
            "slotline_batches_durable",
            "Batches that became durable in Feldera (stream, snapshot, retraction)",
            health.batches_durable,
        )?;
        gauge(
            e,
            "slotline_batches_in_flight",
            "Batches sent to Feldera (or cut for it) and not yet durable (at most MAX_IN_FLIGHT_BATCHES in the window)",
            health.batches_in_flight as f64,
        )?;
        gauge(
            e,
            "slotline_buffered_rows",
            "Rows converted and waiting to be cut into a batch",
            health.buffered_rows as f64,
        )?;
        counter(
            e,
            "slotline_reconnects",
            "Sessions started after the first (each after a failure ended one)",
            u64::from(health.sessions.saturating_sub(1)),
        )?;
        gauge(
            e,
            "slotline_backoff_attempt",
            "Reconnection attempts since the last durable progress",
            f64::from(health.backoff_attempt),
        )?;
        let backoff_s = health
            .reconnect_at
            .map_or(0.0, |at| at.since(now) as f64 / 1e6);
        gauge(
            e,
            "slotline_backoff_remaining_seconds",
            "While backing off, time until the next session starts (0 otherwise)",
            backoff_s,
        )?;
        gauge(
            e,
            "slotline_last_progress_age_seconds",
            "Time since the last durable progress (or since nothing was pending)",
            now.since(health.last_progress) as f64 / 1e6,
        )?;
        let wait = &health.sent.completion_wait;
        let buckets = wait.cumulative();
        encoder
            .encode_descriptor(
                "slotline_completion_wait_seconds",
                "From Feldera accepting an ingress request to its completion_status saying complete",
                None,
                MetricType::Histogram,
            )?
            .encode_histogram::<NoLabelSet>(wait.sum_us as f64 / 1e6, wait.count, &buckets, None)?;
        let fresh = &health.commit_to_durable;
        let buckets = fresh.cumulative();
        encoder
            .encode_descriptor(
                "slotline_commit_to_durable_seconds",
                "From the source commit of a streamed batch's newest change to the batch durable in Feldera (clocks of the PostgreSQL host and this one)",
                None,
                MetricType::Histogram,
            )?
            .encode_histogram::<NoLabelSet>(fresh.sum_us as f64 / 1e6, fresh.count, &buckets, None)?;
        let mut phases = encoder.encode_descriptor(
            "slotline_phase",
            "1 for the pipeline's current phase",
            None,
            MetricType::Gauge,
        )?;
        // Every phase the core names (`PhaseName::ALL`); one of them is 1.
        for phase in PhaseName::ALL {
            let value: i64 = (phase == health.phase).into();
            phases
                .encode_family(&[("phase", phase.as_str())])?
                .encode_gauge(&value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(line: &str, text: &str) -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(line) && l[line.len()..].starts_with(' '))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
    }

    fn fetch(addr: &str, path: &str) -> (u16, String) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent
            .get(format!("http://{addr}{path}"))
            .call()
            .expect("the metrics server answers");
        let code = response.status().as_u16();
        (
            code,
            response.body_mut().read_to_string().unwrap_or_default(),
        )
    }

    fn streaming(progress_deadline: u64) -> Health {
        Health {
            phase: PhaseName::Streaming,
            sessions: 1,
            streaming: true,
            flush: slotline_core::Lsn(1),
            complete: slotline_core::Lsn(1),
            received: slotline_core::Lsn(1),
            buffered_rows: 0,
            batch_in_flight: None,
            batches_in_flight: 0,
            batches_durable: 0,
            sent: Default::default(),
            backoff_attempt: 0,
            reconnect_at: None,
            slot: None,
            slot_wal_warning: false,
            last_progress: slotline_core::time::Mono(0),
            progress_deadline: slotline_core::time::Mono(progress_deadline),
            pending_work: true,
            checkpoints: Default::default(),
            oldest_unacknowledged: None,
            commit_to_durable: Default::default(),
        }
    }

    #[test]
    fn the_server_answers_health_readiness_and_metrics_from_the_published_status() {
        let server = MetricsServer::start("127.0.0.1:0", Clock::start()).expect("listens");
        let addr = server.addr().to_owned();
        assert_eq!(fetch(&addr, "/healthz"), (200, "ok\n".into()));
        assert_eq!(fetch(&addr, "/readyz").0, 503, "nothing published yet");
        let mut publisher = server.publisher();
        publisher.publish(|| Some(streaming(u64::MAX)), false);
        assert_eq!(fetch(&addr, "/readyz"), (200, "ready\n".into()));
        let (code, text) = fetch(&addr, "/metrics");
        assert_eq!(code, 200);
        assert!(
            text.contains("slotline_phase{phase=\"streaming\"} 1"),
            "{text}"
        );
        // Published again at once: throttled, unless forced.
        publisher.publish(|| Some(streaming(0)), false);
        assert_eq!(fetch(&addr, "/readyz").0, 200, "throttled");
        let due = publisher
            .due()
            .expect("a skipped publish is due when its window ends");
        assert!(due > std::time::Instant::now(), "within the window");
        assert!(due <= std::time::Instant::now() + PUBLISH_EVERY);
        publisher.publish(|| Some(streaming(0)), true);
        assert_eq!(publisher.due(), None, "nothing skipped since");
        let (code, body) = fetch(&addr, "/readyz");
        assert_eq!(code, 503);
        assert!(
            body.starts_with("not ready: no durable progress for"),
            "{body}"
        );
        assert_eq!(fetch(&addr, "/other").0, 404);
    }

    #[test]
    fn nothing_is_exposed_before_the_core_published() {
        let text = render(None, Clock::start()).unwrap();
        assert!(!text.contains("slotline_"), "{text}");
    }

    #[test]
    fn a_status_becomes_named_metrics() {
        let health = Health {
            phase: PhaseName::Streaming,
            sessions: 3,
            streaming: true,
            flush: slotline_core::Lsn(0x200),
            complete: slotline_core::Lsn(0x280),
            received: slotline_core::Lsn(0x300),
            buffered_rows: 5,
            batch_in_flight: Some(4),
            batches_in_flight: 3,
            batches_durable: 7,
            sent: slotline_core::health::Counts {
                rows_sent: 11,
                ..Default::default()
            },
            backoff_attempt: 0,
            reconnect_at: None,
            slot: None,
            slot_wal_warning: false,
            last_progress: slotline_core::time::Mono(0),
            progress_deadline: slotline_core::time::Mono(u64::MAX),
            pending_work: false,
            checkpoints: slotline_core::health::CheckpointCounts {
                requested: 4,
                succeeded: 3,
                failed: 1,
                incarnation_changes: 2,
                last_saved: Some(slotline_core::time::Mono(0)),
            },
            oldest_unacknowledged: None,
            commit_to_durable: {
                let mut fresh = slotline_core::health::WaitHistogram::default();
                fresh.observe(3_000);
                fresh.observe(40_000);
                fresh
            },
        };
        let clock = Clock::start();
        // Committed at the source 2.5 s before now.
        let committed = slotline_core::time::PgTime(clock.now().wall.0 - 2_500_000);
        let lagging = Health {
            oldest_unacknowledged: Some(committed),
            ..health.clone()
        };
        let lag = sample(
            "slotline_replication_lag_seconds",
            &render(Some(lagging), clock).unwrap(),
        )
        .expect("exported");
        assert!((2.5..10.0).contains(&lag), "{lag}");
        let text = render(Some(health), Clock::start()).unwrap();
        assert_eq!(
            sample("slotline_replication_lag_seconds", &text),
            Some(0.0),
            "caught up"
        );
        assert_eq!(sample("slotline_complete_lsn", &text), Some(640.0));
        assert_eq!(sample("slotline_checkpoint_lag_bytes", &text), Some(128.0));
        assert_eq!(
            sample("slotline_checkpoints_requested_total", &text),
            Some(4.0)
        );
        assert_eq!(
            sample("slotline_checkpoints_succeeded_total", &text),
            Some(3.0)
        );
        assert_eq!(
            sample("slotline_checkpoints_failed_total", &text),
            Some(1.0)
        );
        assert_eq!(
            sample("slotline_feldera_incarnation_changes_total", &text),
            Some(2.0)
        );
        assert!(sample("slotline_checkpoint_age_seconds", &text).is_some());
        assert_eq!(sample("slotline_flushed_lsn", &text), Some(512.0));
        assert_eq!(sample("slotline_received_lsn", &text), Some(768.0));
        assert_eq!(sample("slotline_rows_sent_total", &text), Some(11.0));
        assert_eq!(sample("slotline_batches_durable_total", &text), Some(7.0));
        assert_eq!(sample("slotline_reconnects_total", &text), Some(2.0));
        assert_eq!(sample("slotline_batches_in_flight", &text), Some(3.0));
        assert_eq!(
            sample("slotline_phase{phase=\"streaming\"}", &text),
            Some(1.0)
        );
        assert_eq!(
            sample("slotline_phase{phase=\"starting\"}", &text),
            Some(0.0)
        );
        assert_eq!(
            sample("slotline_completion_wait_seconds_count", &text),
            Some(0.0)
        );
        assert!(
            text.contains("# TYPE slotline_completion_wait_seconds histogram"),
            "{text}"
        );
        assert_eq!(
            sample("slotline_commit_to_durable_seconds_count", &text),
            Some(2.0)
        );
        assert_eq!(
            sample(
                "slotline_commit_to_durable_seconds_bucket{le=\"0.005\"}",
                &text
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample("slotline_commit_to_durable_seconds_sum", &text),
            Some(0.043)
        );
        assert_eq!(sample("slotline_lag_bytes", &text), None, "not sampled yet");
    }
}
