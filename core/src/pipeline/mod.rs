//! The pipeline: routes inputs to the decision modules and orders the commands they produce.
//!
//! IN PROGRESS: this first version only validates what it is given and then stops with exit
//! code 1, saying streaming is not implemented yet. The decision modules it will route
//! between (`ack`, `outbox`, `backoff`, `status`, `completion`, `crash`, `startup`) exist.

use crate::config::{Config, ConfigError};
use crate::io::{exit, Command, Driver, Input};
use crate::time::Now;
use crate::timer::Deadline;
use std::collections::VecDeque;

/// The streaming pipeline (see the module docs).
#[derive(Debug)]
pub struct Pipeline {
    commands: VecDeque<Command>,
}

impl Pipeline {
    /// Builds a pipeline from a validated configuration. `seed` drives every random choice
    /// (backoff jitter); `now` is the shell's clock at start.
    pub fn new(config: Config, seed: u64, now: Now) -> Result<Pipeline, ConfigError> {
        let _ = (config, seed, now);
        let mut commands = VecDeque::new();
        commands.push_back(Command::Exit {
            code: exit::FATAL,
            reason: "streaming is not implemented in this build yet".to_owned(),
        });
        Ok(Pipeline { commands })
    }
}

impl Driver for Pipeline {
    fn handle(&mut self, _now: Now, _input: Input) {}

    fn poll_command(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    fn poll_timeout(&self) -> Option<Deadline> {
        None
    }
}
