//! The report of an operator's command (`check`, `status`, `drop-slot`): one line per
//! finding, each with a verdict and, for a problem, how to fix it; rendered as text or JSON.
//!
//! Pure: the machines that ask the questions (`ops`, and the startup conversation as a survey) fill
//! it in; the shells only print what `render` returns.

use serde_json::{json, Map, Value};
use std::fmt;

/// How a finding stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// As it must be.
    Ok,
    /// Works, but deserves attention.
    Warn,
    /// The setup would not work (or the command failed): the report exits 1.
    Fail,
    /// A fact, neither good nor bad (`status`).
    Info,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Ok => "ok",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
            Verdict::Info => "info",
        }
    }

    /// The fixed-width tag of a text line (problems in capitals, so they stand out).
    fn tag(self) -> &'static str {
        match self {
            Verdict::Ok => "ok  ",
            Verdict::Warn => "WARN",
            Verdict::Fail => "FAIL",
            Verdict::Info => "    ",
        }
    }
}

/// One finding: what it is about, how it stands, what was found and (for a problem) how
/// to fix it. A message is a single line: newlines in it become `; `.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    pub item: String,
    pub verdict: Verdict,
    pub message: String,
    pub fix: Option<String>,
}

impl Line {
    pub fn new(item: impl Into<String>, verdict: Verdict, message: impl Into<String>) -> Line {
        Line {
            item: item.into(),
            verdict,
            message: one_line(&message.into()),
            fix: None,
        }
    }

    pub fn ok(item: impl Into<String>, message: impl Into<String>) -> Line {
        Line::new(item, Verdict::Ok, message)
    }

    pub fn warn(item: impl Into<String>, message: impl Into<String>) -> Line {
        Line::new(item, Verdict::Warn, message)
    }

    pub fn info(item: impl Into<String>, message: impl Into<String>) -> Line {
        Line::new(item, Verdict::Info, message)
    }

    /// A problem, with how to fix it.
    pub fn fail(
        item: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Line {
        let mut line = Line::new(item, Verdict::Fail, message);
        line.fix = Some(one_line(&fix.into()));
        line
    }

    pub fn with_fix(mut self, fix: impl Into<String>) -> Line {
        self.fix = Some(one_line(&fix.into()));
        self
    }
}

/// A problem's message followed by how to fix it, as a report's text line prints a finding
/// and a refused start its reason: the one spelling of a fix, so that the two say the same.
/// After a message of several lines (a list of problems) the fix has a line of its own, so
/// that it is not read as the last problem's.
pub fn with_fix(message: &str, fix: &str) -> String {
    let gap = if message.contains('\n') { "\n" } else { " " };
    format!("{message}{gap}(fix: {fix})")
}

/// A message or fix on one line: lines after one ending in `:` continue it (a list),
/// other lines are joined with `; `.
fn one_line(text: &str) -> String {
    let mut out = String::new();
    for line in text.trim().lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push_str(if out.ends_with(':') { " " } else { "; " });
        }
        out.push_str(line);
    }
    out
}

/// How a report is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Every finding of one command, in the order they were made, plus structured facts that
/// only the JSON form carries (`status`'s slot, for example).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub lines: Vec<Line>,
    pub facts: Map<String, Value>,
    /// Why a report without problems is not all good (yet): its last text line says this
    /// instead (`status` before the slot exists, which no start has created).
    pub not_yet: Option<String>,
}

impl Report {
    pub fn push(&mut self, line: Line) {
        self.lines.push(line);
    }

    pub fn fact(&mut self, name: &str, value: Value) {
        self.facts.insert(name.to_owned(), value);
    }

    /// No finding failed.
    pub fn passed(&self) -> bool {
        !self.lines.iter().any(|l| l.verdict == Verdict::Fail)
    }

    pub fn problems(&self) -> usize {
        self.lines
            .iter()
            .filter(|l| l.verdict == Verdict::Fail)
            .count()
    }

    /// The report as `command` prints it.
    pub fn render(&self, command: &str, format: Format) -> String {
        match format {
            Format::Text => self.text(command),
            Format::Json => self.json(command),
        }
    }

    fn text(&self, command: &str) -> String {
        let width = self
            .lines
            .iter()
            .map(|l| l.item.chars().count())
            .max()
            .unwrap_or(0);
        let mut out = String::new();
        for line in &self.lines {
            let pad = width - line.item.chars().count();
            let message = match &line.fix {
                Some(fix) => with_fix(&line.message, fix),
                None => line.message.clone(),
            };
            out.push_str(&format!(
                "{} {}{} {message}\n",
                line.verdict.tag(),
                line.item,
                " ".repeat(pad),
            ));
        }
        let (problems, warnings) = (
            self.problems(),
            self.lines
                .iter()
                .filter(|l| l.verdict == Verdict::Warn)
                .count(),
        );
        let good = self.not_yet.as_deref().unwrap_or("all good");
        out.push_str(&match (problems, warnings) {
            (0, 0) => format!("{command}: {good}\n"),
            (0, w) => format!("{command}: {good}, {w} warning(s)\n"),
            (p, w) => format!("{command}: {p} problem(s), {w} warning(s)\n"),
        });
        out
    }

    fn json(&self, command: &str) -> String {
        let lines: Vec<Value> = self
            .lines
            .iter()
            .map(|l| {
                json!({
                    "item": l.item,
                    "verdict": l.verdict.name(),
                    "message": l.message,
                    "fix": l.fix,
                })
            })
            .collect();
        let mut root = Map::new();
        root.insert("command".into(), json!(command));
        root.insert("ok".into(), json!(self.passed()));
        root.insert("findings".into(), Value::Array(lines));
        for (name, value) in &self.facts {
            root.insert(name.clone(), value.clone());
        }
        let mut text = Value::Object(root).to_string();
        text.push('\n');
        text
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text("report"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut report = Report::default();
        report.push(Line::ok("server", "PostgreSQL 15.8"));
        report.push(Line::fail(
            "wal_level",
            "wal_level is replica\nlogical decoding needs logical",
            "set wal_level = logical and restart",
        ));
        report.push(Line::warn("publication", "does not publish truncate"));
        report.fact("slot", json!({"active": false}));
        report
    }

    #[test]
    fn text_has_one_line_per_finding_with_the_fix_of_each_problem() {
        assert_eq!(
            sample().render("check", Format::Text),
            "ok   server      PostgreSQL 15.8\n\
             FAIL wal_level   wal_level is replica; logical decoding needs logical (fix: set wal_level = logical and restart)\n\
             WARN publication does not publish truncate\n\
             check: 1 problem(s), 1 warning(s)\n"
        );
    }

    #[test]
    fn a_report_not_yet_good_says_why_instead_of_all_good_unless_something_failed() {
        let mut report = Report::default();
        report.push(Line::info("slot", "s does not exist yet"));
        report.not_yet = Some("slot s does not exist yet".into());
        assert_eq!(
            report.render("status", Format::Text),
            "     slot s does not exist yet\nstatus: slot s does not exist yet\n"
        );
        report.push(Line::warn("state file", "odd"));
        assert!(report
            .render("status", Format::Text)
            .ends_with("\nstatus: slot s does not exist yet, 1 warning(s)\n"));
        report.push(Line::fail("feldera", "down", "start it"));
        assert!(report
            .render("status", Format::Text)
            .ends_with("\nstatus: 1 problem(s), 1 warning(s)\n"));
    }

    #[test]
    fn a_fix_follows_its_message_on_a_line_of_its_own_after_a_list() {
        assert_eq!(with_fix("no slot", "create it"), "no slot (fix: create it)");
        assert_eq!(
            with_fix("two problems:\n  - one\n  - two", "fix both"),
            "two problems:\n  - one\n  - two\n(fix: fix both)"
        );
    }

    #[test]
    fn json_carries_the_verdicts_the_outcome_and_the_facts() {
        let value: Value = serde_json::from_str(&sample().render("check", Format::Json)).unwrap();
        assert_eq!(value["ok"], json!(false));
        assert_eq!(value["command"], json!("check"));
        assert_eq!(value["findings"][1]["verdict"], json!("fail"));
        assert_eq!(
            value["findings"][1]["fix"],
            json!("set wal_level = logical and restart")
        );
        assert_eq!(value["findings"][0]["fix"], Value::Null);
        assert_eq!(value["slot"]["active"], json!(false));
    }

    #[test]
    fn a_listed_problem_stays_one_line() {
        let line = Line::fail(
            "t",
            "cannot map t:\n - column a: no\n - column b: no",
            "fix",
        );
        assert_eq!(line.message, "cannot map t: - column a: no; - column b: no");
    }

    #[test]
    fn a_report_without_failures_passes_whatever_its_warnings() {
        let mut report = Report::default();
        report.push(Line::ok("a", "fine"));
        report.push(Line::warn("b", "hm"));
        assert!(report.passed());
        assert!(report
            .render("check", Format::Text)
            .ends_with("all good, 1 warning(s)\n"));
        report.push(Line::fail("c", "broken", "mend it"));
        assert!(!report.passed());
    }
}
