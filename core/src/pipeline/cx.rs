//! What a phase hands its work: the command queue, the Feldera link and the state outside
//! phases, borrowed for one input.

use super::env::Env;
use super::feldera_link::FelderaLink;
use super::queue::Queue;
use super::run::Run;
use crate::config::CrashPoint;
use crate::time::Mono;

/// What a phase hands its work: the command queue and the state outside phases.
#[derive(Debug)]
pub(crate) struct Cx<'a> {
    pub(crate) queue: &'a mut Queue,
    pub(crate) link: &'a mut FelderaLink,
    pub(crate) env: &'a Env,
    pub(crate) run: &'a mut Run,
}

impl Cx<'_> {
    pub(crate) fn now(&self) -> Mono {
        self.queue.now.mono
    }

    /// True the N-th time `point` is reached when `CRASH_AT` names it.
    pub(crate) fn crash_at(&mut self, point: CrashPoint) -> bool {
        self.run.crash.reached(point)
    }
}
