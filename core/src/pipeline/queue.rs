//! What every part of the pipeline shares: the ordered command queue, id allocation, the
//! current time and the exit latch (after `Exit`, nothing else is ever emitted).

use crate::io::{Command, ConnId, HttpId, Level, Topic};
use crate::time::Now;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub(crate) struct Queue {
    commands: VecDeque<Command>,
    next_conn: u32,
    next_http: u64,
    exited: bool,
    pub(crate) now: Now,
}

impl Queue {
    pub(crate) fn new(now: Now) -> Queue {
        Queue {
            now,
            ..Queue::default()
        }
    }

    pub(crate) fn push(&mut self, command: Command) {
        if self.exited {
            return;
        }
        self.exited = matches!(command, Command::Exit { .. });
        self.commands.push_back(command);
    }

    pub(crate) fn pop(&mut self) -> Option<Command> {
        self.commands.pop_front()
    }

    pub(crate) fn exited(&self) -> bool {
        self.exited
    }

    pub(crate) fn log(&mut self, level: Level, message: impl Into<String>) {
        self.note(level, Topic::General, message);
    }

    /// A line about one topic (decision lines: `Ack`, `Policy`, `Batch`, ...).
    pub(crate) fn note(&mut self, level: Level, topic: Topic, message: impl Into<String>) {
        self.push(Command::Log {
            level,
            topic,
            message: message.into(),
        });
    }

    /// Whether every command of the last input has been taken by the shell.
    pub(crate) fn drained(&self) -> bool {
        self.commands.is_empty()
    }

    pub(crate) fn exit(&mut self, code: i32, reason: impl Into<String>) {
        self.push(Command::Exit {
            code,
            reason: reason.into(),
        });
    }

    pub(crate) fn conn_id(&mut self) -> ConnId {
        self.next_conn += 1;
        ConnId(self.next_conn)
    }

    pub(crate) fn http_id(&mut self) -> HttpId {
        self.next_http += 1;
        HttpId(self.next_http)
    }

    /// Sends `request` under a new id, and returns the id.
    pub(crate) fn http(&mut self, request: crate::feldera::request::HttpRequest) -> HttpId {
        let id = self.http_id();
        self.push(Command::Http { id, request });
        id
    }
}
