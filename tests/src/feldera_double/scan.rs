//! Running a planned query the way Feldera's ad-hoc engine costs it: a full scan.
//!
//! Feldera pushes neither the filter nor the limit into the table scan
//! (`crates/adapters/src/adhoc/table.rs`, `scan`: "we don't enable filter push-down"), and
//! the scan turns every row of the snapshot into Arrow before any filter, sort or limit runs
//! (`AdHocQueryExecution::execute`). So every query visits and converts every row of the
//! table it reads, whatever its WHERE and LIMIT, and an ORDER BY sorts everything that
//! passed the filter before the first row goes out. The double does the same: a scan
//! visits every row of its snapshot, converts it to its answer line whether or not it is
//! answered, and charges the optional per-row cost; with ORDER BY it visits (and sorts)
//! everything before it yields its first line, without it yields lines as it goes, so a
//! reader that stops reading stops the scan. COUNT(*) visits every row too (its projection
//! is empty, so nothing is converted). Real Feldera may end an unordered LIMIT scan early
//! once the limit is met; the double charges the whole table, the upper bound.
//!
//! Owns: the order of visits, the per-row charge and the rows-scanned count of one query.
//! Never sees HTTP or the channel the lines go to (`answer` does).

use std::collections::VecDeque;
use std::time::Duration;

use super::query::{Output, Plan};

/// The per-row cost owed is slept off in slices of at least this much.
const MIN_SLEEP: Duration = Duration::from_millis(1);

/// One query's scan.
#[derive(Debug)]
pub struct Scan {
    plan: Plan,
    /// Next row of the snapshot to visit.
    next: usize,
    /// Rows visited so far.
    scanned: u64,
    /// Lines answered so far.
    answered: u64,
    /// With ORDER BY (and for a count): the answer, once every row was visited.
    ready: Option<VecDeque<String>>,
    cost: RowCost,
}

/// A configurable cost per visited row, to mimic a slower engine; zero by default.
#[derive(Debug)]
struct RowCost {
    per_row: Duration,
    owed: Duration,
}

impl RowCost {
    fn charge(&mut self) {
        if self.per_row.is_zero() {
            return;
        }
        self.owed += self.per_row;
        if self.owed >= MIN_SLEEP {
            std::thread::sleep(self.owed);
            self.owed = Duration::ZERO;
        }
    }
}

impl Scan {
    /// A scan of `plan` charging `per_row` for each row it visits (it sleeps: run it on a
    /// thread that may block).
    pub fn new(plan: Plan, per_row: Duration) -> Scan {
        Scan {
            plan,
            next: 0,
            scanned: 0,
            answered: 0,
            ready: None,
            cost: RowCost {
                per_row,
                owed: Duration::ZERO,
            },
        }
    }

    /// Rows of the snapshot visited so far.
    pub fn scanned(&self) -> u64 {
        self.scanned
    }

    /// Lines answered so far.
    pub fn answered(&self) -> u64 {
        self.answered
    }

    /// The next answer line (a JSON object, no newline); `None` at the end; an error ends
    /// the answer (it becomes Feldera's `{"error": ...}` line). `cancelled` is asked now
    /// and then while a scan visits rows without answering, so a reader that went away
    /// stops a long ORDER BY or count scan.
    pub fn next_line(&mut self, cancelled: &dyn Fn() -> bool) -> Option<Result<String, String>> {
        let streaming = matches!(&self.plan.output, Output::Rows { order, .. } if order.is_empty());
        let line = if streaming {
            self.next_streamed(cancelled)
        } else {
            if self.ready.is_none() {
                match self.visit_all(cancelled) {
                    Ok(lines) => self.ready = Some(lines),
                    Err(e) => return Some(Err(e)),
                }
            }
            self.ready.as_mut().and_then(VecDeque::pop_front).map(Ok)
        };
        if matches!(line, Some(Ok(_))) {
            self.answered += 1;
        }
        line
    }

    /// Visits one row: counts and charges it.
    fn visit(&mut self) -> usize {
        let index = self.next;
        self.next += 1;
        self.scanned += 1;
        self.cost.charge();
        index
    }

    /// Without ORDER BY: rows in the snapshot's order, each converted when visited; rows
    /// past the LIMIT are still visited and converted (the scan does not know the limit).
    fn next_streamed(&mut self, cancelled: &dyn Fn() -> bool) -> Option<Result<String, String>> {
        let limit = match &self.plan.output {
            Output::Rows { limit, .. } => limit.map_or(u64::MAX, |l| l as u64),
            Output::Count { .. } => 0,
        };
        while self.next < self.plan.rows.len() {
            if self.next % 1024 == 0 && cancelled() {
                return None;
            }
            let index = self.visit();
            let row = &self.plan.rows[index];
            let line = self.plan.line(row);
            if self.answered < limit && self.plan.keeps(row) {
                return Some(line);
            }
        }
        None
    }

    /// ORDER BY or COUNT(*): every row visited first, then the answer.
    fn visit_all(&mut self, cancelled: &dyn Fn() -> bool) -> Result<VecDeque<String>, String> {
        let mut kept: Vec<(usize, Result<String, String>)> = Vec::new();
        let count = matches!(self.plan.output, Output::Count { .. });
        while self.next < self.plan.rows.len() {
            if self.next % 1024 == 0 && cancelled() {
                return Ok(VecDeque::new());
            }
            let index = self.visit();
            let row = &self.plan.rows[index];
            // A count's projection is empty: there is nothing to convert.
            let line = if count {
                Ok(String::new())
            } else {
                self.plan.line(row)
            };
            if self.plan.keeps(row) {
                kept.push((index, line));
            }
        }
        match &self.plan.output {
            Output::Count { name } => {
                Ok(VecDeque::from([Plan::count_line(name, kept.len() as u64)]))
            }
            Output::Rows { limit, .. } => {
                let rows = &self.plan.rows;
                let plan = &self.plan;
                kept.sort_by(|(a, _), (b, _)| plan.order(&rows[*a], &rows[*b]));
                kept.truncate(limit.unwrap_or(usize::MAX));
                kept.into_iter().map(|(_, line)| line).collect()
            }
        }
    }
}
