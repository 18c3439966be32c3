//! Waiting for Feldera to complete a batch: when to ask, how often, when to say it is slow,
//! and when to give up.
//!
//! The poll is paced by what Feldera did recently ([`PollPacer`]): the completion latency of
//! the last [`SAMPLES`] batches, from the 200 of their ingress to the middle between the
//! last answer that said `inprogress` and the one that said `complete` ([`estimate_us`]:
//! taking the later answer alone would feed back, each late sighting moving the next
//! questions later). The first question always goes out as soon as the ingress answered:
//! a Feldera that completes within the request's round trip is seen at once, whatever it
//! did before. Nothing learned yet, the next questions go 2 ms apart, doubling up to
//! 200 ms. Once latencies are known, the second question waits half the median (a slow
//! Feldera is not asked while it cannot be done), the next three a quarter of the median
//! apart, and then the gaps double up to a cap that grows with the median (200 ms to 1 s):
//! a Feldera that suddenly slows down is asked less and less often, never hot. Every bound
//! is fixed, so no history can make the pipeline wait past a completion by more than one
//! gap.
//!
//! A wait longer than `SLOW_AFTER_US` is logged once; one longer than the configured
//! timeout ends the session without acknowledging (the batch will be replayed).

use crate::time::Mono;

/// The first gap, and the step the gaps double from, while nothing is learned.
pub const FIRST_POLL_US: u64 = 2_000;
/// The largest gap while Feldera answers within a second or so.
pub const MAX_POLL_US: u64 = 200_000;
/// No gap is shorter than this, however fast Feldera has been.
pub const MIN_POLL_US: u64 = 1_000;
/// No gap and no first wait is longer than this, however slow Feldera has been.
pub const SLOW_MAX_POLL_US: u64 = 1_000_000;
/// How many recent completion latencies the pacer remembers.
pub const SAMPLES: usize = 16;
pub const SLOW_AFTER_US: u64 = 5_000_000;
/// How many equal gaps a round with a learned latency asks at before the gaps double.
const STEADY_GAPS: u8 = 3;

/// The timeout and the slow-wait log line of one completion wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletionWait {
    started: Mono,
    timeout_us: u64,
    slow_logged: bool,
}

impl CompletionWait {
    pub fn new(started: Mono, timeout_ms: u64) -> CompletionWait {
        CompletionWait {
            started,
            timeout_us: timeout_ms.saturating_mul(1000),
            slow_logged: false,
        }
    }

    pub fn started(&self) -> Mono {
        self.started
    }

    pub fn timeout_at(&self) -> Mono {
        self.started.plus_us(self.timeout_us)
    }

    /// Waited past the timeout at `now`: how long, when it did.
    pub fn timed_out(&self, now: Mono) -> Option<u64> {
        (now >= self.timeout_at()).then(|| now.since(self.started))
    }

    pub fn slow_log_at(&self) -> Option<Mono> {
        (!self.slow_logged).then(|| self.started.plus_us(SLOW_AFTER_US))
    }

    /// Whether the one "slow" log line is due now (true once).
    pub fn take_slow_log(&mut self, now: Mono) -> bool {
        if !self.slow_logged && now.since(self.started) >= SLOW_AFTER_US {
            self.slow_logged = true;
            return true;
        }
        false
    }
}

/// Recent completion latencies, and the poll schedule they call for (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PollPacer {
    samples: [u64; SAMPLES],
    len: usize,
    next: usize,
}

impl PollPacer {
    /// A batch accepted `latency_us` ago was just seen complete.
    pub fn observe(&mut self, latency_us: u64) {
        self.samples[self.next] = latency_us;
        self.next = (self.next + 1) % SAMPLES;
        self.len = (self.len + 1).min(SAMPLES);
    }

    /// The median of the remembered latencies (the upper one of an even count).
    pub fn median_us(&self) -> Option<u64> {
        if self.len == 0 {
            return None;
        }
        let mut known = self.samples[..self.len].to_vec();
        known.sort_unstable();
        Some(known[self.len / 2])
    }

    /// The gaps of a new round of questions, whose first question goes out at once.
    pub fn round(&self) -> PollRound {
        match self.median_us() {
            None => PollRound {
                lead_us: None,
                gap_us: FIRST_POLL_US,
                cap_us: MAX_POLL_US,
                steady: 0,
            },
            Some(median) => {
                let quarter = median / 4;
                PollRound {
                    lead_us: Some((median / 2).clamp(MIN_POLL_US, SLOW_MAX_POLL_US)),
                    gap_us: quarter.clamp(MIN_POLL_US, SLOW_MAX_POLL_US),
                    cap_us: quarter.clamp(MAX_POLL_US, SLOW_MAX_POLL_US),
                    steady: STEADY_GAPS,
                }
            }
        }
    }
}

/// A completion latency to learn from: a batch accepted at `accepted` was seen complete at
/// `complete`, and (when one was) in progress at `in_progress` (the middle of the two).
pub fn estimate_us(accepted: Mono, in_progress: Option<Mono>, complete: Mono) -> u64 {
    let seen = complete.since(accepted);
    match in_progress.filter(|t| *t >= accepted && *t <= complete) {
        Some(t) => (t.since(accepted) + seen) / 2,
        None => seen,
    }
}

/// The gaps between the questions about one batch (or one lane of batches): after the
/// steady ones, each answer "in progress" doubles the next gap, up to the cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollRound {
    /// The gap after the immediate first question, once a latency is learned (half the
    /// median); the steady gaps follow it.
    lead_us: Option<u64>,
    gap_us: u64,
    cap_us: u64,
    /// Gaps left before they start doubling.
    steady: u8,
}

impl Default for PollRound {
    fn default() -> PollRound {
        PollPacer::default().round()
    }
}

impl PollRound {
    /// The gap before the next question; the one after it is twice as long (up to the cap).
    pub fn next_gap_us(&mut self) -> u64 {
        if let Some(lead) = self.lead_us.take() {
            return lead;
        }
        let gap = self.gap_us;
        if self.steady > 1 {
            self.steady -= 1;
        } else {
            self.gap_us = (self.gap_us * 2).min(self.cap_us);
        }
        gap
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_history_the_gaps_after_the_first_question_grow_from_2_ms_to_200_ms() {
        let pacer = PollPacer::default();
        let mut round = pacer.round();
        let gaps: Vec<u64> = (0..10).map(|_| round.next_gap_us() / 1000).collect();
        assert_eq!(gaps, [2, 4, 8, 16, 32, 64, 128, 200, 200, 200]);
    }

    #[test]
    fn the_median_is_of_the_last_sixteen_latencies() {
        let mut pacer = PollPacer::default();
        assert_eq!(pacer.median_us(), None);
        for latency in [5, 1, 9] {
            pacer.observe(latency);
        }
        assert_eq!(pacer.median_us(), Some(5));
        for _ in 0..SAMPLES {
            pacer.observe(40_000);
        }
        assert_eq!(pacer.median_us(), Some(40_000), "old samples are forgotten");
    }

    #[test]
    fn a_learned_latency_sets_the_second_question_and_the_gaps() {
        let mut pacer = PollPacer::default();
        for _ in 0..4 {
            pacer.observe(40_000);
        }
        let mut round = pacer.round();
        let gaps: Vec<u64> = (0..9).map(|_| round.next_gap_us() / 1000).collect();
        assert_eq!(gaps, [20, 10, 10, 10, 20, 40, 80, 160, 200]);
    }

    #[test]
    fn every_wait_and_gap_stays_within_its_bounds() {
        let mut fast = PollPacer::default();
        fast.observe(100);
        let mut round = fast.round();
        assert_eq!(round.next_gap_us(), MIN_POLL_US);
        assert_eq!(round.next_gap_us(), MIN_POLL_US);
        let mut slow = PollPacer::default();
        slow.observe(3_600_000_000);
        let mut round = slow.round();
        for _ in 0..3 {
            assert_eq!(round.next_gap_us(), SLOW_MAX_POLL_US);
        }
    }

    /// Feldera completes every batch `latency_us` after acceptance; the pacer polls each
    /// batch as the sink does (at once, then the round's gaps) and learns from what it
    /// sees. Returns the most polls and the latest sighting of the last ten batches.
    fn steady(latency_us: u64, batches: usize) -> (u32, u64) {
        let mut pacer = PollPacer::default();
        let mut worst = (0, 0);
        for batch in 0..batches {
            let mut at = 0;
            let mut round = pacer.round();
            let (mut polls, mut in_progress) = (1, None);
            while at < latency_us {
                in_progress = Some(Mono(at));
                at += round.next_gap_us();
                polls += 1;
            }
            pacer.observe(estimate_us(Mono(0), in_progress, Mono(at)));
            if batch + 10 >= batches {
                worst = (worst.0.max(polls), worst.1.max(at - latency_us));
            }
        }
        worst
    }

    #[test]
    fn the_estimate_is_between_the_last_in_progress_and_the_complete_answer() {
        assert_eq!(estimate_us(Mono(100), Some(Mono(300)), Mono(500)), 300);
        assert_eq!(estimate_us(Mono(100), None, Mono(500)), 400);
        assert_eq!(
            estimate_us(Mono(100), Some(Mono(50)), Mono(500)),
            400,
            "an answer from before the acceptance says nothing"
        );
    }

    #[test]
    fn a_fast_feldera_is_asked_a_few_times_and_seen_within_a_quarter_of_its_latency() {
        for latency_us in [4_000, 20_000] {
            let (polls, late_us) = steady(latency_us, 60);
            assert!(polls <= 5, "{latency_us}: {polls} polls");
            assert!(
                late_us <= latency_us / 4,
                "{latency_us}: seen {late_us} us late"
            );
        }
        let (unlearned, _) = steady(20_000, 1);
        assert!(
            unlearned >= 5,
            "{unlearned}: without history the doubling asks more"
        );
    }

    #[test]
    fn a_slow_feldera_is_not_polled_hot_and_not_seen_late() {
        // Without history: 2, 4, ..., 200 ms gaps, some seventeen polls for 2 s.
        let (first_polls, _) = steady(2_000_000, 1);
        assert!(first_polls >= 15, "{first_polls}");
        let (polls, late_us) = steady(2_000_000, 60);
        assert!(polls <= 5, "{polls} polls once the latency is known");
        assert!(late_us <= 500_000, "seen {late_us} us late");
    }

    #[test]
    fn a_feldera_done_within_the_round_trip_is_seen_by_the_first_question_whatever_it_did_before() {
        // A Feldera that completes every batch by the time its ingress answers.
        let (polls, late_us) = steady(0, 60);
        assert_eq!((polls, late_us), (1, 0));
        // After a slow spell, a fast batch is still seen by the first question.
        let mut pacer = PollPacer::default();
        for _ in 0..SAMPLES {
            pacer.observe(2_000_000);
        }
        let mut round = pacer.round();
        assert_eq!(round.next_gap_us(), 1_000_000, "the second question waits");
    }

    #[test]
    fn wait_times_out_and_logs_a_slow_wait_once() {
        let mut w = CompletionWait::new(Mono(1_000_000), 60_000);
        assert_eq!(w.timed_out(Mono(60_999_999)), None);
        assert_eq!(w.timed_out(Mono(61_000_000)), Some(60_000_000));
        assert_eq!(w.slow_log_at(), Some(Mono(6_000_000)));
        assert!(!w.take_slow_log(Mono(5_999_999)));
        assert!(w.take_slow_log(Mono(6_000_000)));
        assert!(!w.take_slow_log(Mono(7_000_000)));
        assert_eq!(w.slow_log_at(), None);
    }
}
