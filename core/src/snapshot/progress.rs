//! The snapshot's progress report: per table, rows copied (made durable in Feldera), the
//! rate and an estimate of the time left from `pg_class.reltuples`, every
//! [`REPORT_INTERVAL_US`], and a final line with the totals. A table never analyzed has no
//! row estimate: its estimate comes from the block ranges of its heap read so far.
//!
//! Owns counting and wording; never decides when the copy is complete.

use crate::time::Mono;
use std::fmt::Write as _;

/// How often a progress line is due while copying.
pub const REPORT_INTERVAL_US: u64 = 5_000_000;

#[derive(Clone, Debug, PartialEq)]
struct TableProgress {
    name: String,
    durable_rows: u64,
    estimated_rows: Option<u64>,
    /// Block ranges the copy cut the table's heaps into, and how many were read.
    ranges: u64,
    ranges_read: u64,
    done: bool,
}

/// Counts of the copy, per route.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    started: Mono,
    next_report: Mono,
    tables: Vec<TableProgress>,
}

impl Progress {
    /// Starts counting at `now` for tables named `names` (route order).
    pub fn new(now: Mono, names: Vec<String>) -> Progress {
        Progress {
            started: now,
            next_report: now.plus_us(REPORT_INTERVAL_US),
            tables: names
                .into_iter()
                .map(|name| TableProgress {
                    name,
                    durable_rows: 0,
                    estimated_rows: None,
                    ranges: 0,
                    ranges_read: 0,
                    done: false,
                })
                .collect(),
        }
    }

    pub fn set_estimate(&mut self, route: usize, estimated_rows: Option<u64>) {
        if let Some(table) = self.tables.get_mut(route) {
            table.estimated_rows = estimated_rows;
        }
    }

    /// The copy cut `route`'s heaps into `ranges` block ranges.
    pub fn set_ranges(&mut self, route: usize, ranges: u64) {
        if let Some(table) = self.tables.get_mut(route) {
            table.ranges = ranges;
        }
    }

    /// One block range of `route` was read whole.
    pub fn on_range_read(&mut self, route: usize) {
        if let Some(table) = self.tables.get_mut(route) {
            table.ranges_read += 1;
        }
    }

    /// `rows` of `route` are durable in Feldera.
    pub fn on_durable(&mut self, route: usize, rows: u64) {
        if let Some(table) = self.tables.get_mut(route) {
            table.durable_rows += rows;
        }
    }

    /// Every range of `route` is copied and durable.
    pub fn on_table_done(&mut self, route: usize) {
        if let Some(table) = self.tables.get_mut(route) {
            table.done = true;
        }
    }

    pub fn durable_rows(&self, route: usize) -> u64 {
        self.tables.get(route).map_or(0, |t| t.durable_rows)
    }

    pub fn total_rows(&self) -> u64 {
        self.tables.iter().map(|t| t.durable_rows).sum()
    }

    pub fn next_report(&self) -> Mono {
        self.next_report
    }

    /// The progress line, when one is due at `now` (and schedules the next).
    pub fn report(&mut self, now: Mono) -> Option<String> {
        if now < self.next_report {
            return None;
        }
        self.next_report = now.plus_us(REPORT_INTERVAL_US);
        let elapsed_us = now.since(self.started).max(1);
        let mut line = String::from("copying:");
        for (i, table) in self.tables.iter().enumerate() {
            let sep = if i == 0 { " " } else { "; " };
            let rate = table.durable_rows.saturating_mul(1_000_000) / elapsed_us;
            let _ = write!(line, "{sep}{} {} rows", table.name, table.durable_rows);
            if table.done {
                line.push_str(" (done)");
                continue;
            }
            let _ = write!(line, ", {rate} rows/s");
            match (table.estimated_rows, rate) {
                (Some(estimate), rate) if rate > 0 && estimate > table.durable_rows => {
                    let left_s = (estimate - table.durable_rows) / rate;
                    let _ = write!(line, ", about {estimate} in all, ETA {}", seconds(left_s));
                }
                (Some(estimate), _) => {
                    let _ = write!(line, ", about {estimate} in all");
                }
                (None, _) => {
                    line.push_str(", size unknown (never analyzed)");
                    if table.ranges > 0 {
                        let _ = write!(
                            line,
                            ": {} of {} block ranges read",
                            table.ranges_read, table.ranges
                        );
                    }
                    if table.ranges_read > 0 && table.ranges > table.ranges_read {
                        let left = u128::from(table.ranges - table.ranges_read);
                        let left_us = u128::from(elapsed_us) * left / u128::from(table.ranges_read);
                        let left_s = u64::try_from(left_us / 1_000_000).unwrap_or(u64::MAX);
                        let _ = write!(line, ", ETA {} by ranges", seconds(left_s));
                    }
                }
            }
        }
        Some(line)
    }

    /// The final line: totals and time.
    pub fn summary(&self, now: Mono) -> String {
        let elapsed_us = now.since(self.started).max(1);
        let total = self.total_rows();
        let per_table: Vec<String> = self
            .tables
            .iter()
            .map(|t| format!("{} {}", t.name, t.durable_rows))
            .collect();
        // A rate over less than a second is noise ("2 rows in 0.0 s (49 rows/s)").
        let took = if elapsed_us < 1_000_000 {
            "in under a second".to_owned()
        } else {
            let rate = total.saturating_mul(1_000_000) / elapsed_us;
            format!("in {:.1} s ({rate} rows/s)", elapsed_us as f64 / 1e6)
        };
        let rows = if total == 1 { "row" } else { "rows" };
        format!("copied {total} {rows} {took}: {}", per_table.join(", "))
    }
}

fn seconds(total: u64) -> String {
    match total {
        0..=59 => format!("{total}s"),
        60..=3599 => format!("{}m{:02}s", total / 60, total % 60),
        _ => format!("{}h{:02}m", total / 3600, (total % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_every_five_seconds_with_rate_and_eta() {
        let mut p = Progress::new(Mono(0), vec!["users".into(), "items".into()]);
        p.set_estimate(0, Some(1_000_000));
        assert_eq!(p.report(Mono(4_999_999)), None);
        p.on_durable(0, 100_000);
        p.on_durable(1, 30);
        p.on_table_done(1);
        assert_eq!(
            p.report(Mono(5_000_000)).as_deref(),
            Some("copying: users 100000 rows, 20000 rows/s, about 1000000 in all, ETA 45s; items 30 rows (done)")
        );
        assert_eq!(p.report(Mono(6_000_000)), None, "next one 5 s later");
        assert_eq!(p.next_report(), Mono(10_000_000));
    }

    #[test]
    fn unknown_size_says_so_and_summary_has_totals() {
        let mut p = Progress::new(Mono(0), vec!["t".into()]);
        p.on_durable(0, 10);
        assert_eq!(
            p.report(Mono(5_000_000)).as_deref(),
            Some("copying: t 10 rows, 2 rows/s, size unknown (never analyzed)")
        );
        assert_eq!(
            p.summary(Mono(2_500_000)),
            "copied 10 rows in 2.5 s (4 rows/s): t 10"
        );
    }

    #[test]
    fn long_etas_read_in_minutes_and_hours() {
        assert_eq!(seconds(59), "59s");
        assert_eq!(seconds(61), "1m01s");
        assert_eq!(seconds(7300), "2h01m");
    }

    #[test]
    fn a_table_never_analyzed_gets_its_eta_from_the_block_ranges_read() {
        let mut p = Progress::new(Mono(0), vec!["t".into()]);
        p.set_ranges(0, 8);
        p.on_durable(0, 5_000);
        assert_eq!(
            p.report(Mono(5_000_000)).as_deref(),
            Some("copying: t 5000 rows, 1000 rows/s, size unknown (never analyzed): 0 of 8 block ranges read")
        );
        p.on_range_read(0);
        p.on_range_read(0);
        assert_eq!(
            p.report(Mono(10_000_000)).as_deref(),
            Some("copying: t 5000 rows, 500 rows/s, size unknown (never analyzed): 2 of 8 block ranges read, ETA 30s by ranges")
        );
    }

    #[test]
    fn a_copy_under_a_second_gives_no_rate() {
        let mut p = Progress::new(Mono(0), vec!["users".into()]);
        p.on_durable(0, 2);
        assert_eq!(
            p.summary(Mono(40_000)),
            "copied 2 rows in under a second: users 2"
        );
        let mut one = Progress::new(Mono(0), vec!["users".into()]);
        one.on_durable(0, 1);
        assert_eq!(
            one.summary(Mono(2_000_000)),
            "copied 1 row in 2.0 s (0 rows/s): users 1"
        );
    }
}
